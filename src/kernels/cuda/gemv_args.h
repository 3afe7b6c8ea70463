#pragma once
// Arguments of every GEMV kernel (plain data, passed by value) and the launch helpers each
// format's .cu file exports to the dispatcher.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nibble::cuda::detail {

struct GemvArgs {
  const uint8_t* q = nullptr;       // element codes, kernel layout, row-major [N][row bytes]
  const uint8_t* scales = nullptr;  // per-group metadata, row-major [N][groups * width]
  const uint8_t* aux = nullptr;
  const __half* x = nullptr;        // [M, K]
  __half* y = nullptr;              // [M, N]
  int M = 0, N = 0, K = 0;
  float out_scale = 1.0f;           // global scale, applied to the FP32 sums before rounding
  float sv_a = 0.0f, sv_b = 0.0f;   // RaZeR special-value magnitudes
  // RaZeR special-value magnitudes a, b times 2^-14 as fp16 bits in both halves (filled on the
  // host): a block's sv is then a select and a sign flip, no float conversion. Only constant
  // indices may be used in kernels (a dynamic index copies the whole argument block to local memory).
  uint32_t sv_h2[2] = {0, 0};
  int k_splits = 1;                 // CUDA-core kernel: warps of a CTA that share rows, splitting K
};

constexpr int kThreads = 256;  // 8 warps per CTA, each warp owns R whole rows of W
constexpr int kWarps = kThreads / 32;

// Host: fills a.sv_h2 from a.sv_a / a.sv_b (the FP4 bit decoders' value * 2^-14 scaling).
void fill_sv_table(GemvArgs& a);

// One launcher per (format, decoder): picks the M / R instantiation. rows_per_warp is 2 or 4.
using GemvLauncher = void (*)(const GemvArgs& a, int rows_per_warp, cudaStream_t s);

void launch_nvfp4_bits(const GemvArgs&, int, cudaStream_t);
void launch_nvfp4_lut(const GemvArgs&, int, cudaStream_t);
void launch_nvfp4_razer_bits(const GemvArgs&, int, cudaStream_t);
void launch_nvfp4_razer_lut(const GemvArgs&, int, cudaStream_t);
void launch_mxfp4(const GemvArgs&, int, cudaStream_t);
void launch_fp4_g128(const GemvArgs&, int, cudaStream_t);
void launch_razer_fp4_g128(const GemvArgs&, int, cudaStream_t);
void launch_razer_fp3_g128(const GemvArgs&, int, cudaStream_t);
void launch_int4_g128(const GemvArgs&, int, cudaStream_t);
void launch_nf4(const GemvArgs&, int, cudaStream_t);

// Tensor-core (mma.sync) GEMV over the mma tile layout, for M >= 2.
using MmaLauncher = void (*)(const GemvArgs& a, cudaStream_t s);
void launch_mma_nvfp4(const GemvArgs&, cudaStream_t);
void launch_mma_nvfp4_razer(const GemvArgs&, cudaStream_t);
void launch_mma_mxfp4(const GemvArgs&, cudaStream_t);
void launch_mma_fp4_g128(const GemvArgs&, cudaStream_t);
void launch_mma_razer_fp4_g128(const GemvArgs&, cudaStream_t);
void launch_mma_int4_g128(const GemvArgs&, cudaStream_t);
void launch_mma_nf4(const GemvArgs&, cudaStream_t);

}  // namespace nibble::cuda::detail

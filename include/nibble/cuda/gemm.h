#pragma once
// Tensor-core GEMMs for prefill and large batches: Y[M, N] = X[M, K] · W[N, K]^T, any M >= 1,
// fp16 activations and output (bits as uint16), FP32 accumulation (docs/gemm.md). From 32 rows on
// an sm_90 GPU, Hopper wgmma kernels (weights decoded in registers as wgmma's A operand, TMA loads;
// NIBBLE_WGMMA_MIN_M moves the switch); below, and elsewhere, mma.sync kernels with a multi-stage
// cp.async pipeline:
//   - nestedfp  (paper 004) FP16 mode: both byte planes loaded, FP16 rebuilt, exact;
//   - nestedfp8 (paper 004) FP8 mode: upper plane only, e4m3 tensor cores (sm_89+), per-token E4M3
//     activation quantization in front (sx = 448 / amax(row)), 2^-8 / sx in the epilogue; from 64
//     rows through cuBLASLt's FP8 GEMM (gemm_nestedfp8_cublaslt: its accumulation on Hopper keeps
//     fewer bits than FP32), below through the FP32-exact mma.sync kernel;
//   - W4A16: nvfp4, nvfp4-razer, fp4-g128, razer-fp4-g128, int4-g128, mxfp4, nf4 codes dequantized
//     in registers into FP16 fragments (global scale in the epilogue). mxfp4's power-of-two scales
//     are rebased into fp16 range (the shift joins the global scale); nf4 rounds level * absmax
//     (FP32) once to fp16.
// Requirements (nibble::Error otherwise): K a multiple of 64 (128 for nestedfp8) and of the group
// size, N a multiple of 8. Built only when nvcc is found (NIBBLE_HAVE_CUDA).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/format.h"

namespace nibble::cuda {

class CublasLtFp8;

// The K order of a NestedFP weight on the device. nested: within each 64-k block, position
// p = 16 t + 4 s + j holds k = 16 s + 2 t + (j & 1) + 8 (j >> 1) (t, s, j in 0..3), so the bytes
// that one thread of the FP16 tensor-core GEMM needs for its A fragments are adjacent (one 16-byte
// shared-memory load per row and plane). The FP8 mode quantizes its activations into the same
// order: a dot product over K does not depend on the order, as long as both operands share it.
enum class KOrder { natural, nested };
// Where k lands in KOrder::nested.
constexpr int64_t nested_position(int64_t k) {
  const int64_t kb = k & 63;
  return (k - kb) + 16 * ((kb >> 1) & 3) + 4 * (kb >> 4) + 2 * ((kb >> 3) & 1) + (kb & 1);
}

// Device scratch for split-K partial sums and the FP8 activation copy. Grows on demand (a
// cudaMalloc, so call once outside any CUDA-graph capture first); one per stream.
class GemmWorkspace {
 public:
  GemmWorkspace() = default;
  ~GemmWorkspace();
  GemmWorkspace(const GemmWorkspace&) = delete;
  GemmWorkspace& operator=(const GemmWorkspace&) = delete;
  // At least `bytes` of device memory in one of three independent slots (0: split-K partials,
  // 1: the quantized activations, 2: weights dequantized to fp16 for cuBLAS); growing a slot
  // frees its old contents.
  void* get(size_t bytes, int slot = 0);
  // This stream's cuBLASLt FP8 handle (for gemm_nestedfp8_cublaslt), created on first use.
  CublasLtFp8& cublaslt_fp8();

 private:
  void* p_[3] = {nullptr, nullptr, nullptr};
  size_t n_[3] = {0, 0, 0};
  std::unique_ptr<CublasLtFp8> lt_;
};

// A weight in the GEMM kernels' layout (docs/gemm.md), owning its device memory.
class GemmWeight {
 public:
  GemmWeight() = default;
  GemmWeight(GemmWeight&& o) noexcept;
  GemmWeight& operator=(GemmWeight&& o) noexcept;
  GemmWeight(const GemmWeight&) = delete;
  GemmWeight& operator=(const GemmWeight&) = delete;
  ~GemmWeight();

  std::string format;      // registry name
  int64_t N = 0, K = 0;
  int block = 0;           // group size along K
  float global_scale = 1.0f;
  void* codes = nullptr;   // nestedfp*: upper plane [N, K] in KOrder::nested; W4: repacked nibbles [N, K/2]
  void* meta = nullptr;    // nestedfp: lower plane [N, K] (KOrder::nested); W4: [K/block, N] words (fp16 scale | fp16 sv or 1024+z)
  size_t codes_bytes = 0, meta_bytes = 0;
  size_t bytes() const { return codes_bytes + meta_bytes; }

 private:
  void release() noexcept;
};

struct GemmOptions {
  int split_k = 0;  // 0: chosen from the shape and the SM count; else the number of K splits
};

// Formats with a GEMM kernel here (registry names).
std::vector<std::string> gemm_formats();
bool has_gemm_kernel(std::string_view format);

// Repacks (W4; nestedfp planes into KOrder::nested) t and uploads it. Throws nibble::Error naming `name`
// and the field at fault for unsupported formats or shapes.
GemmWeight upload_gemm(const PackedTensor& t, std::string_view name = "weight");

// Y = X · W^T, x [M, K] fp16, y [M, N] fp16 on the device, asynchronous on `stream`. nestedfp8
// quantizes X per token first (into `ws`).
void gemm(const uint16_t* x, int M, const GemmWeight& w, uint16_t* y, GemmWorkspace& ws, cudaStream_t stream,
          const GemmOptions& opt = {});

// The W4 weights dequantized to fp16 [N, K] row-major with the global scale applied (each weight
// rounded once to fp16), for a cuBLAS FP16 GEMM at large M, where dequantizing once and running
// cuBLAS beats the fused kernel (see docs/gemm.md). Throws nibble::Error for nestedfp*.
void dequantize_fp16(const GemmWeight& w, uint16_t* out, cudaStream_t stream);

// W4A4 on Hopper (no FP4 tensor cores; paper 000's online activation quantization): each row of
// x is quantized on the GPU to `act_format` ("nvfp4", or "nvfp4-razer-act" with special-value
// magnitude act_sv), bit-identical to the CPU format library (per-row FP32 global scale
// amax / 2688), and handed to the W4A16 kernel as fp16 code * E4M3 block scale, which is exact in
// fp16; the global scales (weight and per-row activation) are applied in the epilogue. So the W4A4
// GEMM is an exact dequantize-to-FP16 tensor-core GEMM. w must be a W4 format (not nestedfp*).
bool is_w4a4_act_format(std::string_view act_format);
void quantize_rows_nvfp4(const uint16_t* x, int M, int K, std::string_view act_format, float act_sv, uint16_t* xq,
                         float* row_scale, cudaStream_t stream);
void gemm_w4a4(const uint16_t* x, int M, const GemmWeight& w, std::string_view act_format, float act_sv, uint16_t* y,
               GemmWorkspace& ws, cudaStream_t stream, const GemmOptions& opt = {});

// The two stages of the nestedfp8 path, exposed for tests and benchmarks.
// x8[m, k] = E4M3(x[m, k] * sx[m]) (round to nearest even, saturating), sx = 448 / amax(row m)
// (1 for an all-zero row); row_scale[m] = 1 / (256 * sx[m]). KOrder::nested (K a multiple of 64)
// writes x8[m, nested_position(k)] instead, the order of a nestedfp GemmWeight's upper plane.
void quantize_rows_e4m3(const uint16_t* x, int M, int K, uint8_t* x8, float* row_scale, cudaStream_t stream,
                        KOrder order = KOrder::natural);
// y = (x8 · upper^T) * row_scale[m], upper [N, K] e4m3 codes in the K order of x8.
void gemm_e4m3(const uint8_t* x8, const float* row_scale, int M, const uint8_t* upper, int N, int K, uint16_t* y,
               GemmWorkspace& ws, cudaStream_t stream, const GemmOptions& opt = {});

// cuBLASLt FP8 reference point: y = alpha * x8 · w8^T, e4m3 inputs, fp16 output, FP32 accumulation.
class CublasLtFp8 {
 public:
  CublasLtFp8();
  ~CublasLtFp8();
  CublasLtFp8(const CublasLtFp8&) = delete;
  CublasLtFp8& operator=(const CublasLtFp8&) = delete;
  void gemm(const uint8_t* x8, const uint8_t* w8, uint16_t* y, int M, int N, int K, float alpha, cudaStream_t stream);

  // How gemm_row_scaled applies the per-token scale. kEpilogue: cuBLASLt's outer-vector scaling
  // (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F: sm_90 with cuBLAS 12.9+; nibble::Error where
  // cuBLASLt has no algorithm for it); kSeparatePass: FP32 output (GemmWorkspace slot 0), then a
  // row-scale pass to fp16; kAuto: the epilogue where available, else the separate pass.
  enum class RowScale { kAuto, kEpilogue, kSeparatePass };
  // y[m, n] = fp16(row_scale[m] * sum_k x8[m, k] * w8[n, k]): e4m3 inputs, row_scale a device
  // vector of M floats, one rounding to fp16. Not FP32-exact: Hopper's FP8 tensor cores keep fewer
  // bits than FP32 between cuBLASLt's promotions to FP32 (errors up to ~1e-3 x sum|terms|, measured
  // by tests/cuda/test_gemm_nestedfp8_lt.cpp; gemm_e4m3 is FP32-exact). Needs K a multiple of 16, N
  // of 8, 16-byte aligned pointers. The first call of a shape picks the algorithm (and may allocate):
  // make it outside CUDA-graph capture. Not thread-safe: one CublasLtFp8 per stream.
  void gemm_row_scaled(const uint8_t* x8, const float* row_scale, const uint8_t* w8, uint16_t* y, int M, int N, int K,
                       GemmWorkspace& ws, cudaStream_t stream, RowScale how = RowScale::kAuto);
  // The path kAuto takes for this shape (looks it up on first use, like gemm_row_scaled).
  RowScale auto_row_scale(int M, int N, int K);
  // On (default): the first call of a shape (outside graph capture) times cuBLASLt's candidate
  // algorithms on its own buffers (synchronously) and keeps the fastest for M in the same
  // power-of-two bucket; off: the heuristic's first choice.
  void set_autotune(bool on);

 private:
  struct Plans;  // descriptors and algorithms per shape and path, cached
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::unique_ptr<Plans> plans_;
};

// NestedFP8 on cuBLASLt's FP8 tensor cores: x quantized per token (quantize_rows_e4m3_vec in
// KOrder::nested, into ws slot 1), then lt.gemm_row_scaled with the upper plane [N, K] used as stored. The two-stage
// definition (quantize_rows_e4m3, gemm_e4m3) with the same quantized inputs and scales, but the
// accumulation precision of cuBLASLt FP8 on Hopper (see gemm_row_scaled). w: nestedfp8 or
// nestedfp (same upper plane). The routing for gemm(): lt = ws.cublaslt_fp8().
void gemm_nestedfp8_cublaslt(const uint16_t* x, int M, const GemmWeight& w, uint16_t* y, GemmWorkspace& ws,
                             CublasLtFp8& lt, cudaStream_t stream,
                             CublasLtFp8::RowScale how = CublasLtFp8::RowScale::kAuto);

// quantize_rows_e4m3 with 16-byte loads, bit-identical to it; K a multiple of 8 (64 for
// KOrder::nested), x 16-byte aligned.
void quantize_rows_e4m3_vec(const uint16_t* x, int M, int K, uint8_t* x8, float* row_scale, cudaStream_t stream,
                            KOrder order = KOrder::natural);

}  // namespace nibble::cuda

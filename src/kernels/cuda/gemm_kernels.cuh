#pragma once
// Entry points of the GEMM kernel files (gemm_nestedfp.cu, gemm_w4a16.cu) for gemm_api.cpp.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "nibble/cuda/gemm.h"

namespace nibble::cuda::tc {

void nestedfp16(const uint16_t* x, int M, const uint8_t* upper, const uint8_t* lower, int N, int K, uint16_t* y,
                GemmWorkspace& ws, int split_k, cudaStream_t stream);

// fp4: FP4 codes times the fp16 scale (-0 stays -0); fp4_special: the same, code -0 -> the fp16
// special value of the metadata word (RaZeR); int4: fp16 scale and 1024 + zero point; nf4: NF4
// level (float LUT) times an FP32 absmax.
enum class W4Decode { fp4, fp4_special, int4, nf4 };

// The decode of a W4 format's GemmWeight (format names as in the registry).
W4Decode w4_decode(std::string_view format);

// Calls f(std::integral_constant<W4Decode, d>{}): one switch for every kernel templated on it.
template <class F>
void with_decode(W4Decode d, F&& f) {
  switch (d) {
    case W4Decode::fp4: return f(std::integral_constant<W4Decode, W4Decode::fp4>{});
    case W4Decode::fp4_special: return f(std::integral_constant<W4Decode, W4Decode::fp4_special>{});
    case W4Decode::int4: return f(std::integral_constant<W4Decode, W4Decode::int4>{});
    case W4Decode::nf4: return f(std::integral_constant<W4Decode, W4Decode::nf4>{});
  }
}
void w4a16(const uint16_t* x, int M, const uint32_t* codes, const uint32_t* meta, int group, W4Decode decode, int N,
           int K, float alpha, uint16_t* y, GemmWorkspace& ws, int split_k, cudaStream_t stream,
           const float* row_scale = nullptr);
// The same weights dequantized to fp16 [N, K] row-major (alpha applied), for the cuBLAS path.
void w4_dequantize(const uint32_t* codes, const uint32_t* meta, int group, W4Decode decode, int N, int K, float alpha,
                   uint16_t* out, cudaStream_t stream);

}  // namespace nibble::cuda::tc

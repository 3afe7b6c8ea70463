#pragma once
// Where a linear switches from the GEMV (few rows, bandwidth-bound) to the tensor-core GEMM, and
// from that fused GEMM to dequantizing the weight to fp16 once and running cuBLAS.
#include <cstdint>
#include <string_view>

namespace nibble::cuda {

// The largest row count M for which the GEMV runs a linear of `format` [N, K] (above it: the
// GEMM where the format has one). 16 (the GEMV's limit) until a measured table replaces it.
int gemm_crossover_m(std::string_view format, int64_t K, int64_t N);

// The smallest M at which dequantize-to-fp16 + cuBLAS beats the fused W4A16 GEMM. Measured by
// `nibble bench gemm` (H100, 2026-11-22, docs/perf/gemm-notes.md): M >= 256 on every Llama-3.1-8B
// projection for nvfp4, nf4, mxfp4, int4-g128 and razer-fp4-g128 (the fused kernel runs at 24-30%
// of cuBLAS there, the dequantization pass costs about one weight read + one fp16 write).
int dequant_crossover_m(std::string_view format, int64_t K, int64_t N);

}  // namespace nibble::cuda

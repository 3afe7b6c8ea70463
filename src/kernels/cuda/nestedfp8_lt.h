#pragma once
// Internal to the NestedFP8 paths: the row-scale pass used when cuBLASLt cannot apply the per-token
// scale in its epilogue (include/nibble/cuda/gemm.h, CublasLtFp8::gemm_row_scaled), and the shape
// check of the two E4M3 row quantizers.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "nibble/cuda/gemm.h"

namespace nibble::cuda {

// y[m, n] = fp16_rn(c[m, n] * row_scale[m]); c FP32 [M, N] row-major, N a multiple of 4.
void scale_rows_to_fp16(const float* c, const float* row_scale, int M, int N, uint16_t* y, cudaStream_t stream);

// Fills n floats with 1.0f (the unit column scale of the outer-vector epilogue).
void fill_ones(float* p, int64_t n, cudaStream_t stream);

// The shape check of both E4M3 row quantizers (nibble::Error naming `what`): M >= 1 and K a positive
// multiple of `natural_multiple`, or of 64 in KOrder::nested.
void check_quantize_shape(const char* what, int M, int K, KOrder order, int natural_multiple);

}  // namespace nibble::cuda

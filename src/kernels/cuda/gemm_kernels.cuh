#pragma once
// Entry points of the GEMM kernel files (gemm_nestedfp.cu, gemm_w4a16.cu) for gemm_api.cpp.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "nibble/cuda/gemm.h"

namespace nibble::cuda::tc {

void nestedfp16(const uint16_t* x, int M, const uint8_t* upper, const uint8_t* lower, int N, int K, uint16_t* y,
                GemmWorkspace& ws, int split_k, cudaStream_t stream);

enum class W4Decode { fp4, int4 };
void w4a16(const uint16_t* x, int M, const uint32_t* codes, const uint32_t* meta, int group, W4Decode decode, int N,
           int K, float alpha, uint16_t* y, GemmWorkspace& ws, int split_k, cudaStream_t stream);

}  // namespace nibble::cuda::tc

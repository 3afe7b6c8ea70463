#pragma once
// Entry points of the Hopper wgmma GEMMs (gemm_wgmma_w4a16.cu, gemm_wgmma_nestedfp.cu), for
// gemm_api.cpp's routing and the tests. Same contracts as tc::w4a16 / tc::nestedfp16
// (gemm_kernels.cuh): any M >= 1, N a multiple of 8, K a multiple of 64 and of the group, and the
// same fp16 weights (decoded by the same functions), so only the accumulation order differs.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "gemm_kernels.cuh"
#include "nibble/cuda/gemm.h"

namespace nibble::cuda::wg {

// True when the current device runs sm_90a code (compute capability 9.0): wgmma exists there only.
bool supported();

// Both are the register-A kernel (gemm_wgmma_rega.cuh): 64, 128 or 256 rows of Y per CTA by M.
void w4a16(const uint16_t* x, int M, const uint32_t* codes, const uint32_t* meta, int group, tc::W4Decode decode,
           int N, int K, float alpha, uint16_t* y, GemmWorkspace& ws, int split_k, cudaStream_t stream,
           const float* row_scale = nullptr);
void nestedfp16(const uint16_t* x, int M, const uint8_t* upper, const uint8_t* lower, int N, int K, uint16_t* y,
                GemmWorkspace& ws, int split_k, cudaStream_t stream);

}  // namespace nibble::cuda::wg

#pragma once
// Facts about the current CUDA device, queried once (gemm_support.cu).
namespace nibble::cuda::tc {

int sm_count();
int compute_capability();  // major * 10 + minor

}  // namespace nibble::cuda::tc

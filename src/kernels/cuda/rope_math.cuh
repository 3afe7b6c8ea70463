#pragma once
// The RoPE rotation of one pair (HF convention: element i pairs with i + d/2), shared by the RoPE
// op and the q/k/v GEMV epilogue so that both round the same way (explicit roundings: no
// contraction left to the compiler).
#include <cuda_runtime.h>

namespace nibble::cuda::detail {

// (a, b) rotated by the angle whose cosine is c and sine s: (a c - b s, b c + a s).
__device__ __forceinline__ float2 rope_rotate(float a, float b, float c, float s) {
  return make_float2(__fmaf_rn(a, c, -__fmul_rn(b, s)), __fmaf_rn(b, c, __fmul_rn(a, s)));
}

}  // namespace nibble::cuda::detail

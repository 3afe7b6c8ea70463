#pragma once
// The RoPE rotation of one pair (x_i, x_{i + d/2}) by an angle of cosine c and sine s, written once
// for the two places that rotate: the q/k norm + RoPE kernel (ops_rope.cu) and the q/k/v GEMV that
// rotates its own outputs (gemv_args.h, store_rope_pair). The roundings are explicit, so that
// nvcc cannot contract a * c - b * s into an FMA in one place and not in the other: both give the
// same bits.
namespace nibble::cuda::detail {

struct RopePair {
  float a, b;
};
__device__ __forceinline__ RopePair rope_rotate(float a, float b, float c, float s) {
  return {__fmaf_rn(a, c, -__fmul_rn(b, s)), __fmaf_rn(b, c, __fmul_rn(a, s))};
}

}  // namespace nibble::cuda::detail

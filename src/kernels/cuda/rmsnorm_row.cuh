#pragma once
// The summation order of an RMSNorm row, fixed whatever the CTA that computes it: the norm kernels
// (ops_norm.cu) and the one-row GEMV that normalizes its own X (gemv.cuh, linear_rmsnorm) give
// the same bits.
//
// The order: kNormThreads "virtual threads" (fewer for short rows: H rounded up to 32); virtual
// thread t sums v[i]^2 for i = t, t + VT, t + 2 VT, ... in turn (FMAs from 0); each group of 32
// virtual threads adds its sums by a butterfly (warp_sum), and the VT / 32 group sums are added by
// one more butterfly. r = rsqrt(sum / H + eps); y[i] = fp16(w[i] * (v[i] * r)).
#include <cuda_fp16.h>

#include "reduce.cuh"

namespace nibble::cuda::detail {

constexpr int kNormThreads = 1024;
constexpr int kNormMaxPerThread = 16;  // H <= 16384
__host__ __device__ constexpr int norm_virtual_threads(int H) {
  return H > kNormThreads ? kNormThreads : (H + 31) / 32 * 32;
}
__host__ __device__ constexpr int norm_per_thread(int H) { return (H + kNormThreads - 1) / kNormThreads; }

// A virtual thread's sum ss added over its group of 32 (the calling warp's lanes), the group sum
// stored in scratch[group] where valid (a warp past the virtual threads stores nothing).
__device__ __forceinline__ void norm_group_sum(float ss, unsigned group, bool valid, float* scratch) {
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0 && valid) scratch[group] = ss;
}
// The final butterfly over the group sums in scratch[0 .. VT / 32) (after a barrier).
__device__ __forceinline__ float norm_total(const float* scratch, int H) {
  const int lane = threadIdx.x & 31;
  return warp_sum(lane < norm_virtual_threads(H) / 32 ? scratch[lane] : 0.0f);
}
__device__ __forceinline__ float norm_factor(float total, int H, float eps) { return rsqrtf(total / float(H) + eps); }
__device__ __forceinline__ __half norm_out(float w, float v, float r) { return __float2half_rn(w * (v * r)); }

}  // namespace nibble::cuda::detail

// NF4 dequantization to fp16 (paper 003): the branch-tree baseline (bitsandbytes' nested-if
// decode) and the shared-memory lookup table. Each thread expands one 32-bit word (8 codes) into
// one 16-byte store, so a warp reads 128 and writes 512 contiguous bytes (fully coalesced: the
// earlier 32-codes-per-thread version wrote with a 64-byte stride and ran at 58 % of copy
// bandwidth). Both kernels compute level * absmax in FP32 and round once, so their outputs are
// bit-identical.
#include <cuda_fp16.h>

#include "nf4_levels.cuh"
#include "nibble/cuda/check.h"
#include "nibble/cuda/linear.h"
#include "nibble/error.h"

namespace nibble::cuda::detail {
namespace {

constexpr int kDequantThreads = 256;

// The branch tree: one bit of the code per level.
__device__ __forceinline__ float nf4_tree(uint32_t v) {
  if (v & 8) {
    if (v & 4) {
      if (v & 2) return (v & 1) ? 1.0f : 0.7229568362236023f;
      return (v & 1) ? 0.5626170039176941f : 0.44070982933044434f;
    }
    if (v & 2) return (v & 1) ? 0.33791524171829224f : 0.24611230194568634f;
    return (v & 1) ? 0.16093020141124725f : 0.07958029955625534f;
  }
  if (v & 4) {
    if (v & 2) return (v & 1) ? 0.0f : -0.09105003625154495f;
    return (v & 1) ? -0.18477343022823334f : -0.28444138169288635f;
  }
  if (v & 2) return (v & 1) ? -0.39491748809814453f : -0.5250730514526367f;
  return (v & 1) ? -0.6961928009986877f : -1.0f;
}

template <bool kLut>
__global__ void __launch_bounds__(kDequantThreads)
    nf4_dequant_kernel(const uint32_t* __restrict__ q, const float* __restrict__ absmax, uint4* __restrict__ out,
                       size_t nwords) {
  __shared__ float lut[16];
  if (kLut) {
    if (threadIdx.x < 16) lut[threadIdx.x] = kNf4Levels[threadIdx.x];
    __syncthreads();
  }
  const size_t c = size_t(blockIdx.x) * kDequantThreads + threadIdx.x;
  if (c >= nwords) return;
  const uint32_t w = q[c];
  const float s = absmax[c / 8];  // 64-element blocks = 8 words
  uint32_t h[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // byte j: element 2j (low nibble) and 2j + 1
    const uint32_t lo = (w >> (8 * j)) & 15u, hi = (w >> (8 * j + 4)) & 15u;
    const float a = kLut ? lut[lo] : nf4_tree(lo), b = kLut ? lut[hi] : nf4_tree(hi);
    h[j] = uint32_t(__half_as_ushort(__float2half_rn(a * s))) | (uint32_t(__half_as_ushort(__float2half_rn(b * s))) << 16);
  }
  out[c] = make_uint4(h[0], h[1], h[2], h[3]);
}

}  // namespace
}  // namespace nibble::cuda::detail

namespace nibble::cuda {

void nf4_dequantize(const DeviceWeight& w, uint16_t* out, Nf4Dequant which, cudaStream_t stream) {
  if (w.kind != WeightKind::nf4) throw Error("nf4_dequantize: weight '" + w.format + "' is not nf4");
  const size_t nwords = size_t(w.N) * size_t(w.K) / 8;
  const dim3 grid(unsigned((nwords + detail::kDequantThreads - 1) / detail::kDequantThreads));
  const auto* q = static_cast<const uint32_t*>(w.qweight);
  const auto* s = static_cast<const float*>(w.scales);
  auto* o = reinterpret_cast<uint4*>(out);
  if (which == Nf4Dequant::shared_lut)
    detail::nf4_dequant_kernel<true><<<grid, detail::kDequantThreads, 0, stream>>>(q, s, o, nwords);
  else
    detail::nf4_dequant_kernel<false><<<grid, detail::kDequantThreads, 0, stream>>>(q, s, o, nwords);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nibble::cuda

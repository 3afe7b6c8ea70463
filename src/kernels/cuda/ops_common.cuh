#pragma once
// Shared pieces of the model-runtime ops (nibble/cuda/ops.h): host-side argument checks, the
// launch check, fp16 bit conversions, the warp/block reductions (reduce.cuh); the ops launch through
// programmatic dependent launch (pdl.cuh).
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "nibble/cuda/check.h"
#include "nibble/error.h"
#include "pdl.cuh"
#include "reduce.cuh"

namespace nibble::cuda::ops::detail {

using cuda::detail::launch_pdl;
using cuda::detail::launch_pdl_cluster;
using cuda::detail::pdl_trigger;
using cuda::detail::pdl_wait;
using cuda::detail::block_max;
using cuda::detail::block_sum;
using cuda::detail::warp_max;
using cuda::detail::warp_sum;

// Throws nibble::Error "cuda::ops::<fn>: <what>" when `ok` is false.
inline void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw Error(std::string("cuda::ops::") + fn + ": " + what);
}

inline void require_ptr(const void* p, const char* fn, const char* name) {
  require(p != nullptr, fn, std::string(name) + " is null");
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

inline void check_launch(const char* fn) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(std::string("cuda::ops::") + fn + ": launch failed: " + cudaGetErrorName(e) + ": " +
                cudaGetErrorString(e));
}

__device__ __forceinline__ float h2f(uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ __forceinline__ uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }

// The 8 halves of a 16-byte word as floats.
__device__ __forceinline__ void unpack8(const uint4& w, float (&f)[8]) {
  const __half2* h = reinterpret_cast<const __half2*>(&w);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __half22float2(h[i]);
    f[2 * i] = v.x, f[2 * i + 1] = v.y;
  }
}
// (value, index) maximum, the lowest index on equal values; NaN values never win.
struct ArgMax {
  float v;
  int i;
};
__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}
__device__ inline ArgMax block_argmax(ArgMax a, ArgMax* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax b{__shfl_xor_sync(0xffffffffu, a.v, o), __shfl_xor_sync(0xffffffffu, a.i, o)};
    a = better(a, b);
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = a;
  __syncthreads();
  a = lane < nwarps ? scratch[lane] : ArgMax{-INFINITY, 0x7fffffff};
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax b{__shfl_xor_sync(0xffffffffu, a.v, o), __shfl_xor_sync(0xffffffffu, a.i, o)};
    a = better(a, b);
  }
  return a;
}

// Calls f(i, z[i]) for every i < V of a row, this thread's share (stride: the block), four
// elements per 16-byte load when the row is aligned, four loads in flight.
template <class F>
__device__ __forceinline__ void row_foreach(const float* z, int V, F&& f) {
  const int bd = blockDim.x;
  int i = threadIdx.x;
  if ((reinterpret_cast<uintptr_t>(z) & 15) == 0) {
    const float4* z4 = reinterpret_cast<const float4*>(z);
    const int n4 = V / 4;
    for (; i + 3 * bd < n4; i += 4 * bd) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = z4[i + u * bd];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = 4 * (i + u * bd);
        f(j, v[u].x), f(j + 1, v[u].y), f(j + 2, v[u].z), f(j + 3, v[u].w);
      }
    }
    for (; i < n4; i += bd) {
      const float4 v = z4[i];
      f(4 * i, v.x), f(4 * i + 1, v.y), f(4 * i + 2, v.z), f(4 * i + 3, v.w);
    }
    for (i = 4 * n4 + threadIdx.x; i < V; i += bd) f(i, z[i]);
    return;
  }
  for (; i + 3 * bd < V; i += 4 * bd) {
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = z[i + u * bd];
#pragma unroll
    for (int u = 0; u < 4; ++u) f(i + u * bd, v[u]);
  }
  for (; i < V; i += bd) f(i, z[i]);
}

}  // namespace nibble::cuda::ops::detail

// Device passes of the cuBLASLt NestedFP8 path: the per-token E4M3 activation quantizer with
// 16-byte loads, a row read once from registers (bit-identical to quantize_rows_e4m3, natural or
// NestedFP K order), the FP32 -> fp16 row-scale pass, and the shape check both quantizers share.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <string>

#include "half_bits.cuh"
#include "nestedfp8_lt.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"
#include "reduce.cuh"

namespace nibble::cuda {
namespace {

constexpr int kQuantThreads = 256;
constexpr int kMaxPer = 16;  // 16-byte words a thread keeps in registers: rows of up to 32768

__device__ __forceinline__ float abs_max8(const uint4& v, float amax) {
  const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
  return amax;
}

// The block's largest |x| (every thread gets it); sx = 448 / amax (1 for a zero row) and
// row_scale[m] = 1 / (256 sx), the arithmetic of quantize_rows_e4m3.
__device__ __forceinline__ float row_sx(float amax, float* row_scale, int m) {
  __shared__ float scratch[32];
  amax = detail::block_max(amax, scratch);
  const float sx = amax > 0.0f ? 448.0f / amax : 1.0f;
  if (threadIdx.x == 0) row_scale[m] = 1.0f / (256.0f * sx);
  return sx;
}

// Eight codes satfinite E4M3(x * sx) of a 16-byte word of halves.
__device__ __forceinline__ uint2 codes8(const uint4& v, float sx) {
  const __half2* h = reinterpret_cast<const __half2*>(&v);
  uint16_t q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    q[i] = __nv_cvt_float2_to_fp8x2(make_float2(f.x * sx, f.y * sx), __NV_SATFINITE, __NV_E4M3);
  }
  return make_uint2(q[0] | uint32_t(q[1]) << 16, q[2] | uint32_t(q[3]) << 16);
}

// Stores the eight codes of 16-byte word c (k = 8 c .. 8 c + 7) of a row. KOrder::nested: their
// pairs (k, k + 1) land 16 bytes apart (nested_position), four 2-byte stores. (A thread storing
// 8-byte runs from four adjacent words was no faster: 2026-11-27, docs/perf/gemm-notes.md.)
template <bool kNested>
__device__ __forceinline__ void store_codes8(uint8_t* row8, int c, uint2 q) {
  if constexpr (kNested) {
    uint16_t* p = reinterpret_cast<uint16_t*>(row8 + nested_position(8 * int64_t(c)));
    p[0] = uint16_t(q.x), p[8] = uint16_t(q.x >> 16), p[16] = uint16_t(q.y), p[24] = uint16_t(q.y >> 16);
  } else {
    reinterpret_cast<uint2*>(row8)[c] = q;
  }
}

// One block per row. Each thread loads its kPer 16-byte words at once (all loads in flight) and
// keeps them in registers for the amax and the codes: the row is read once.
template <int kPer, bool kNested>
__global__ void __launch_bounds__(kQuantThreads) quantize_rows_regs_kernel(const uint16_t* x, int K, uint8_t* x8,
                                                                           float* row_scale) {
  const int m = blockIdx.x, chunks = K / 8;
  const uint4* row = reinterpret_cast<const uint4*>(x + int64_t(m) * K);
  uint4 v[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = threadIdx.x + j * kQuantThreads;
    v[j] = c < chunks ? row[c] : make_uint4(0, 0, 0, 0);
  }
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) amax = abs_max8(v[j], amax);
  const float sx = row_sx(amax, row_scale, m);
  uint8_t* out = x8 + int64_t(m) * K;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = threadIdx.x + j * kQuantThreads;
    if (c < chunks) store_codes8<kNested>(out, c, codes8(v[j], sx));
  }
}

// Rows longer than the registers hold: pass 1 finds amax, pass 2 re-reads the row (an L1 / L2 hit).
template <bool kNested>
__global__ void __launch_bounds__(kQuantThreads) quantize_rows_two_pass_kernel(const uint16_t* x, int K, uint8_t* x8,
                                                                               float* row_scale) {
  const int m = blockIdx.x, chunks = K / 8;
  const uint4* row = reinterpret_cast<const uint4*>(x + int64_t(m) * K);
  float amax = 0.0f;
#pragma unroll 4  // several 16-byte loads in flight per thread
  for (int c = threadIdx.x; c < chunks; c += kQuantThreads) amax = abs_max8(row[c], amax);
  const float sx = row_sx(amax, row_scale, m);
  uint8_t* out = x8 + int64_t(m) * K;
  for (int c = threadIdx.x; c < chunks; c += kQuantThreads) store_codes8<kNested>(out, c, codes8(row[c], sx));
}

// Four outputs per thread: one 16-byte FP32 load, one 8-byte fp16 store.
__global__ void scale_rows_kernel(const float4* c, const float* row_scale, int quads_per_row, int64_t quads,
                                  uint2* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < quads; i += int64_t(gridDim.x) * blockDim.x) {
    const float s = row_scale[i / quads_per_row];
    const float4 v = c[i];
    const __half2 a = __floats2half2_rn(v.x * s, v.y * s), b = __floats2half2_rn(v.z * s, v.w * s);
    y[i] = make_uint2(detail::half2_bits(a), detail::half2_bits(b));
  }
}

__global__ void fill_ones_kernel(float* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = 1.0f;
}

int grid_for(int64_t work, int threads) {
  const int64_t blocks = (work + threads - 1) / threads;
  return int(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

template <bool kNested>
void launch_quantize_rows(const uint16_t* x, int M, int K, uint8_t* x8, float* row_scale, cudaStream_t stream) {
  const int per = (K / 8 + kQuantThreads - 1) / kQuantThreads;
  auto go = [&](auto kernel) { kernel<<<M, kQuantThreads, 0, stream>>>(x, K, x8, row_scale); };
  if (per <= 1) go(quantize_rows_regs_kernel<1, kNested>);
  else if (per <= 2) go(quantize_rows_regs_kernel<2, kNested>);
  else if (per <= 4) go(quantize_rows_regs_kernel<4, kNested>);
  else if (per <= 8) go(quantize_rows_regs_kernel<8, kNested>);
  else if (per <= kMaxPer) go(quantize_rows_regs_kernel<kMaxPer, kNested>);
  else go(quantize_rows_two_pass_kernel<kNested>);
}

}  // namespace

void quantize_rows_e4m3_vec(const uint16_t* x, int M, int K, uint8_t* x8, float* row_scale, cudaStream_t stream,
                            KOrder order) {
  check_quantize_shape("quantize_rows_e4m3_vec", M, K, order, 8);
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(x8) % 8 != 0)
    throw Error("quantize_rows_e4m3_vec: x must be 16-byte and x8 8-byte aligned");
  if (order == KOrder::nested) launch_quantize_rows<true>(x, M, K, x8, row_scale, stream);
  else launch_quantize_rows<false>(x, M, K, x8, row_scale, stream);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

void check_quantize_shape(const char* what, int M, int K, KOrder order, int natural_multiple) {
  const int k_multiple = order == KOrder::nested ? 64 : natural_multiple;
  if (M < 1 || K < k_multiple || K % k_multiple != 0)
    throw Error(std::string(what) + ": unsupported shape M=" + std::to_string(M) + " K=" + std::to_string(K) +
                " (need M >= 1, K a positive multiple of " + std::to_string(k_multiple) + ")");
}

void scale_rows_to_fp16(const float* c, const float* row_scale, int M, int N, uint16_t* y, cudaStream_t stream) {
  if (M < 1 || N < 4 || N % 4 != 0)
    throw Error("scale_rows_to_fp16: unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N));
  const int64_t quads = int64_t(M) * (N / 4);
  scale_rows_kernel<<<grid_for(quads, 256), 256, 0, stream>>>(reinterpret_cast<const float4*>(c), row_scale, N / 4,
                                                              quads, reinterpret_cast<uint2*>(y));
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

void fill_ones(float* p, int64_t n, cudaStream_t stream) {
  fill_ones_kernel<<<grid_for(n, 256), 256, 0, stream>>>(p, n);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nibble::cuda

#pragma once
// Shared pieces of the Hopper (sm_90a) GEMM kernels of gemm_wgmma_*.cu (Y[M, N] = X[M, K] · W[N, K]^T
// with wgmma.mma_async, both operands in shared memory; A = activations by TMA, B = the weight
// tile a B policy dequantizes into fp16 once per CTA): tile constants, the swizzled layout, matrix
// descriptors, mbarriers, TMA, the wgmma wrappers and the epilogue. Two main loops use them:
// gemm_wgmma_allwarps.cuh (up to 128 rows per CTA) and gemm_wgmma_specialized.cuh (256 rows).
// Swizzled layout: row r of a 1024-byte-aligned tile is bytes r * 128 .. r * 128 + 127 and its
// 16-byte chunk c sits at chunk c ^ (r % 8): what a SWIZZLE_128B matrix descriptor reads.
#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "gemm_core.cuh"
#include "mbarrier.cuh"

namespace nibble::cuda::wg {

constexpr int kDequantThreads = 256;  // threads that dequantize a B tile (policy thread index 0..255)
constexpr int kBN = 128;              // columns of Y per CTA (one m64n128k16 per m64 slice and k16)
constexpr int kBK = 64;               // k per tile: one 128-byte row of fp16
constexpr int kRowBytes = 128;        // bytes per swizzled row
constexpr int kSmemLimit = 232448;    // opt-in shared memory per block on sm_90 (227 KB)

// Byte offset of 16-byte chunk c of row r in a swizzled tile.
__device__ __forceinline__ int swizzled(int r, int c) { return r * kRowBytes + ((c ^ (r & 7)) << 4); }

// SWIZZLE_128B K-major descriptor: start address >> 4 (bits 0-13), leading byte offset unused for
// swizzled K-major (1), stride byte offset 1024 >> 4 between 8-row groups (bits 32-45), layout
// type 1 = 128-byte swizzle (bits 62-63). k16 step ks starts 32 bytes further into the row.
__device__ __forceinline__ uint64_t sw128_desc(const uint8_t* tile, int ks) {
  const uint32_t a = tc::smem_addr(tile) + 32 * ks;
  return uint64_t((a & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

using tc::fence_proxy_async, tc::mbar_init, tc::mbar_arrive, tc::mbar_expect_bytes, tc::mbar_wait;

// TMA: the box of `map` at (c0 = innermost coordinate, c1) into shared memory, completing on bar.
// Parts of the box outside the tensor are filled with zeros (and still counted in the bytes).
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          tc::smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(tc::smem_addr(bar))
      : "memory");
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
__device__ __forceinline__ void fence_acc(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define NIBBLE_ACC8(i)                                                                                  \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
// D[64 x 128] = A[64 x 16] · B[16 x 128] (+ D when accumulate), both K-major in shared memory, fp16
// in, fp32 accumulate.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, "
      "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : NIBBLE_ACC8(0), NIBBLE_ACC8(8), NIBBLE_ACC8(16), NIBBLE_ACC8(24), NIBBLE_ACC8(32), NIBBLE_ACC8(40),
        NIBBLE_ACC8(48), NIBBLE_ACC8(56)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
#undef NIBBLE_ACC8

// One k-tile of a warpgroup as one wgmma group: MT m64 slices (A rows 64 apart) x 4 k16 steps
// against the dequantized B tile. The CTA's first k-tile overwrites the accumulators, which are
// never zeroed: zeroing them made ptxas serialize every wgmma of the loop (warning C7515), as did
// fence_acc inside the loop (it "defines" registers of the wgmma still in flight).
template <int MT>
__device__ __forceinline__ void mma_tile(float (&acc)[MT][64], const uint8_t* a, const uint8_t* bh, bool first) {
  wgmma_fence();
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks)
      wgmma_m64n128k16(acc[i], sw128_desc(a + i * 64 * kRowBytes, ks), sw128_desc(bh, ks), !first || ks > 0);
  wgmma_commit();
}
#endif

// acc[i] of the warpgroup wg that computes rows wg * BM/2 .. holds rows wg * BM/2 + 64 i + 16 w +
// lane/4 (+8 for the odd pair) and columns 8 j + 2 (lane % 4) (+1): register 4 j + 2 h + c (w: warp
// in the warpgroup).
template <class C>
__device__ __forceinline__ void store_tile(const tc::EpilogueArgs& e, float (&acc)[C::MT][64], int wg, int m0,
                                           int n0, int split) {
  const int w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < C::MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + wg * (C::BM / 2) + 64 * i + 16 * w + (lane >> 2) + 8 * h;
      if (m >= e.M) continue;
      const float s = e.alpha * (e.row_scale ? e.row_scale[m] : 1.0f);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int n = n0 + 8 * j + 2 * (lane & 3);
        if (n >= e.N) continue;
        const float v0 = acc[i][4 * j + 2 * h], v1 = acc[i][4 * j + 2 * h + 1];
        if (e.partial) {
          *reinterpret_cast<float2*>(e.partial + (int64_t(split) * e.M + m) * e.N + n) = make_float2(v0, v1);
        } else {
          *reinterpret_cast<__half2*>(e.y + int64_t(m) * e.N + n) = __floats2half2_rn(v0 * s, v1 * s);
        }
      }
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// After the main loop: waits for the warpgroup's last wgmma, then stores its rows of the tile.
template <class C>
__device__ __forceinline__ void finish_tile(const tc::EpilogueArgs& e, float (&acc)[C::MT][64], int wg, int m0,
                                            int n0, int split) {
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < C::MT; ++i) fence_acc(acc[i]);
  store_tile<C>(e, acc, wg, m0, n0, split);
}
#endif

// B policy interface (BOp): Params (its tensor maps included); kRawBytes (one staging slot),
// kExtraBytes (constant tables); init(extra) once per CTA; raw_bytes(p) the bytes load_raw brings;
// load_raw(raw, p, n0, kt, bar) issues (one thread) the TMA of k-tile kt's raw bytes for columns
// n0 .. n0 + 127; dequantize(raw, bh, p, extra, pt) writes the fp16 [128 x 64] tile, swizzled, as
// thread pt of kDequantThreads.
}  // namespace nibble::cuda::wg

#pragma once
// Shared pieces of the Hopper (sm_90a) GEMM kernels of gemm_wgmma_*.cu: tile constants, the
// shared-memory matrix descriptor of the activation tile (TMA, 128-byte swizzle: row r of a
// 1024-byte-aligned tile is bytes r * 128 .. r * 128 + 127, its 16-byte chunk c at chunk c ^ (r % 8)),
// mbarriers, TMA and the wgmma fences.
#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "gemm_core.cuh"
#include "mbarrier.cuh"

namespace nibble::cuda::wg {

constexpr int kBK = 64;             // k per tile: one 128-byte row of fp16
constexpr int kRowBytes = 128;      // bytes per swizzled row
constexpr int kSmemLimit = 232448;  // opt-in shared memory per block on sm_90 (227 KB)

// SWIZZLE_128B K-major descriptor: start address >> 4 (bits 0-13), leading byte offset unused for
// swizzled K-major (1), stride byte offset 1024 >> 4 between 8-row groups (bits 32-45), layout
// type 1 = 128-byte swizzle (bits 62-63). k16 step ks starts 32 bytes further into the row.
__device__ __forceinline__ uint64_t sw128_desc(const uint8_t* tile, int ks) {
  const uint32_t a = tc::smem_addr(tile) + 32 * ks;
  return uint64_t((a & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

using tc::mbar_init, tc::mbar_expect_bytes, tc::mbar_wait;

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
#endif
}  // namespace nibble::cuda::wg

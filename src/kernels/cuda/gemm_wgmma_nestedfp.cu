// NestedFP16 (paper 004, FP16 mode) on the Hopper wgmma GEMM (gemm_wgmma_core.cuh): the B policy
// stages both byte planes of a 64-k tile and rebuilds the FP16 weights (exact, FORMATS.md) once per
// CTA into the swizzled fp16 tile.
#include <cuda_fp16.h>

#include <string>

#include "gemm_wgmma.cuh"
#include "gemm_wgmma_launch.cuh"
#include "nibble/error.h"

namespace nibble::cuda::wg {

// Not in an anonymous namespace: the sm_80 pass (kernel body compiled out) would warn that its
// members are unreferenced.
struct NestedTile {
  struct Params {
    CUtensorMap upper, lower;  // [N, K] bytes each; box 64 x 128
  };
  static constexpr int kPlaneBytes = kBN * 64;  // 64 bytes (= 64 k) per column per plane
  static constexpr int kRawBytes = 2 * kPlaneBytes;
  static constexpr int kExtraBytes = 0;
  static constexpr bool kHeavyDecode = false;

  __device__ __forceinline__ static void init(uint8_t*) {}
  __device__ __forceinline__ static uint32_t raw_bytes(const Params&) { return kRawBytes; }
  __device__ __forceinline__ static void load_raw(uint8_t* raw, const Params& p, int n0, int kt, uint64_t* bar) {
    tma_load_2d(raw, &p.upper, kt * 64, n0, bar);
    tma_load_2d(raw + kPlaneBytes, &p.lower, kt * 64, n0, bar);
  }

  // Four weights from upper bytes u and lower bytes l, per byte (FORMATS.md):
  // hi6 = ((U - (L >> 7)) >> 1) & 0x3F, w = ((U & 0x80) | hi6) << 8 | L. Bit 7 of every byte is set
  // before the subtraction so that borrows stay inside the byte (bits 6..1 are unaffected).
  __device__ __forceinline__ static void rebuild(uint32_t u, uint32_t l, uint32_t& h01, uint32_t& h23) {
    const uint32_t hi6 = (((u | 0x80808080u) - ((l >> 7) & 0x01010101u)) >> 1) & 0x3F3F3F3Fu;
    const uint32_t top = (u & 0x80808080u) | hi6;
    h01 = __byte_perm(l, top, 0x5140);
    h23 = __byte_perm(l, top, 0x7362);
  }

  // Thread pt -> (column r, 16-k quarter c4), twice: 16 weights each = swizzled
  // chunks 2 c4 and 2 c4 + 1. All loads are issued before the first store: the compiler cannot
  // tell that the stores miss the raw bytes, and few warps per scheduler dequantize, so latency
  // is not hidden by other warps.
  __device__ __forceinline__ static void dequantize(const uint8_t* raw, uint8_t* bh, const Params&, const uint8_t*,
                                                    int pt) {
    constexpr int kIter = kBN * 4 / kDequantThreads;
    uint4 u[kIter], l[kIter];
#pragma unroll
    for (int i = 0; i < kIter; ++i) {
      const int idx = pt + i * kDequantThreads, r = idx >> 2, c4 = idx & 3;
      u[i] = *reinterpret_cast<const uint4*>(raw + r * 64 + c4 * 16);
      l[i] = *reinterpret_cast<const uint4*>(raw + kPlaneBytes + r * 64 + c4 * 16);
    }
#pragma unroll
    for (int i = 0; i < kIter; ++i) {
      const int idx = pt + i * kDequantThreads, r = idx >> 2, c4 = idx & 3;
      uint4 lo, hi;
      rebuild(u[i].x, l[i].x, lo.x, lo.y);
      rebuild(u[i].y, l[i].y, lo.z, lo.w);
      rebuild(u[i].z, l[i].z, hi.x, hi.y);
      rebuild(u[i].w, l[i].w, hi.z, hi.w);
      *reinterpret_cast<uint4*>(bh + swizzled(r, 2 * c4)) = lo;
      *reinterpret_cast<uint4*>(bh + swizzled(r, 2 * c4 + 1)) = hi;
    }
  }
};

void nestedfp16(const uint16_t* x, int M, const uint8_t* upper, const uint8_t* lower, int N, int K, uint16_t* y,
                GemmWorkspace& ws, int split_k, cudaStream_t stream, int block_m) {
  if (M < 1 || N < 8 || N % 8 != 0 || K < 64 || K % 64 != 0)
    throw Error("nestedfp wgmma GEMM: unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " (need M >= 1, N a multiple of 8, K a multiple of 64)");
  const tc::Problem p{reinterpret_cast<const uint8_t*>(x), int64_t(K) * 2, M, N, nullptr, 1.0f, y};
  const NestedTile::Params bp{
      tensor_map_2d(upper, 1, uint64_t(K), uint64_t(N), uint64_t(K), 64, kBN, false, "nestedfp upper plane"),
      tensor_map_2d(lower, 1, uint64_t(K), uint64_t(N), uint64_t(K), 64, kBN, false, "nestedfp lower plane")};
  launch<NestedTile>(p, bp, ws, split_k, block_m, stream);
}

}  // namespace nibble::cuda::wg

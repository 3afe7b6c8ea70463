// NestedFP16 (paper 004, FP16 mode) on Hopper: the register-A wgmma GEMM (gemm_wgmma_rega.cuh) with
// both byte planes of the CTA's 128 weight rows brought by TMA (64-byte swizzle: conflict-free
// 16-bit reads) and each thread rebuilding the fp16 weights of its A fragments exactly
// (FORMATS.md) in registers. The weights stay the one stored copy whose upper plane the FP8 path
// reads.
#include <cuda.h>
#include <cuda_fp16.h>

#include <string>

#include "gemm_wgmma.cuh"
#include "gemm_wgmma_rega.cuh"
#include "nestedfp_rebuild.cuh"
#include "nibble/error.h"

namespace nibble::cuda::wg {

// Not in an anonymous namespace: the sm_80 pass (kernel body compiled out) would warn that its
// members are unreferenced.
struct NestedPlanes {
  struct Params {
    CUtensorMap upper, lower;  // [N, K] bytes each; box 64 x 128, 64-byte swizzle
  };
  static constexpr int kPlaneBytes = kRegaRows * 64;  // one plane of a 64-k tile
  static constexpr int kRawBytes = 2 * kPlaneBytes;
  static constexpr int kRegaStages = 4, kExtraBytes = 0;

  __device__ __forceinline__ static void init(uint8_t*) {}
  __device__ __forceinline__ static uint32_t raw_bytes(const Params&) { return kRawBytes; }
  __device__ __forceinline__ static void load_raw(uint8_t* dst, const Params& p, int n0, int kt, uint64_t* bar) {
    tma_load_2d(dst, &p.upper, kt * 64, n0, bar);
    tma_load_2d(dst + kPlaneBytes, &p.lower, kt * 64, n0, bar);
  }

  // The 16 bits at (row r, byte k) of a 64-byte-swizzled plane: 16-byte chunk k / 16 ^ (r / 2 % 4).
  __device__ __forceinline__ static uint32_t u16_at(const uint8_t* plane, int r, int k) {
    return *reinterpret_cast<const uint16_t*>(plane + r * 64 + ((((k >> 4) ^ (r >> 1)) & 3) << 4) + (k & 15));
  }

  __device__ __forceinline__ static void fragments(const uint8_t* w, const Params&, int rl, const uint8_t*,
                                                   uint32_t (&a)[4][4]) {
    const uint8_t* up = w;
    const uint8_t* lo = w + kPlaneBytes;
    const int t2 = 2 * ((threadIdx.x & 31) & 3);
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {  // bytes: (r0, k), (r0, k + 1), (r1, k), (r1, k + 1)
        const int k = 16 * s + 8 * hh + t2;
        const uint32_t u = u16_at(up, rl, k) | u16_at(up, rl + 8, k) << 16;
        const uint32_t l = u16_at(lo, rl, k) | u16_at(lo, rl + 8, k) << 16;
        nestedfp_rebuild(u, l, a[s][2 * hh], a[s][2 * hh + 1]);
      }
  }
};

void nestedfp16(const uint16_t* x, int M, const uint8_t* upper, const uint8_t* lower, int N, int K, uint16_t* y,
                GemmWorkspace& ws, int split_k, cudaStream_t stream) {
  if (M < 1 || N < 8 || N % 8 != 0 || K < 64 || K % 64 != 0)
    throw Error("nestedfp wgmma GEMM: unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " (need M >= 1, N a multiple of 8, K a multiple of 64)");
  const tc::Problem pr{reinterpret_cast<const uint8_t*>(x), int64_t(K) * 2, M, N, nullptr, 1.0f, y};
  const NestedPlanes::Params p{
      tensor_map_2d(upper, 1, uint64_t(K), uint64_t(N), uint64_t(K), 64, kRegaRows, Swizzle::b64, "nestedfp upper plane"),
      tensor_map_2d(lower, 1, uint64_t(K), uint64_t(N), uint64_t(K), 64, kRegaRows, Swizzle::b64, "nestedfp lower plane")};
  launch_rega<NestedPlanes>(pr, p, ws, split_k, stream);
}

}  // namespace nibble::cuda::wg

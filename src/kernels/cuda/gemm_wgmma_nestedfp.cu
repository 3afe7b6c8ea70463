// NestedFP16 (paper 004, FP16 mode) on Hopper: the register-A wgmma GEMM (gemm_wgmma_rega.cuh) with
// both byte planes of the CTA's 128 weight rows brought by TMA and each thread rebuilding the fp16
// weights of its A fragments exactly (FORMATS.md) in registers. The planes are in KOrder::nested
// (include/nibble/cuda/gemm.h), so a thread's 16 bytes of a row and plane are one 16-byte load
// (it had taken eight 2-byte loads in natural order). The weights stay the one stored copy whose
// upper plane the FP8 path reads.
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
    CUtensorMap upper, lower;  // [N, K] bytes each; box 64 x 128, no swizzle
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

  // Thread t's 16 bytes of row r: word s holds k 16 s + 2 t, + 1, + 8, + 9, i.e. its pairs q = 0
  // and 2 of step s for that row, which nestedfp_rebuild turns into the two fp16 pairs directly.
  // A quarter warp reads two whole rows: conflict-free.
  __device__ __forceinline__ static uint4 chunk(const uint8_t* plane, int r) {
    return *reinterpret_cast<const uint4*>(plane + r * 64 + 16 * (threadIdx.x & 3));
  }

  __device__ __forceinline__ static void fragments(const uint8_t* w, const Params&, int rl, const uint8_t*,
                                                   uint32_t (&a)[4][4]) {
    const uint4 u[2] = {chunk(w, rl), chunk(w, rl + 8)};
    const uint4 l[2] = {chunk(w + kPlaneBytes, rl), chunk(w + kPlaneBytes, rl + 8)};
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // row rl + 8 h: pairs q = h and q = 2 + h
      nestedfp_rebuild(u[h].x, l[h].x, a[0][h], a[0][2 + h]);
      nestedfp_rebuild(u[h].y, l[h].y, a[1][h], a[1][2 + h]);
      nestedfp_rebuild(u[h].z, l[h].z, a[2][h], a[2][2 + h]);
      nestedfp_rebuild(u[h].w, l[h].w, a[3][h], a[3][2 + h]);
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
      tensor_map_2d(upper, 1, uint64_t(K), uint64_t(N), uint64_t(K), 64, kRegaRows, Swizzle::none, "nestedfp upper plane"),
      tensor_map_2d(lower, 1, uint64_t(K), uint64_t(N), uint64_t(K), 64, kRegaRows, Swizzle::none, "nestedfp lower plane")};
  launch_rega<NestedPlanes>(pr, p, ws, split_k, stream);
}

}  // namespace nibble::cuda::wg

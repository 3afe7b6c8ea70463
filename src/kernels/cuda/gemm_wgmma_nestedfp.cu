// NestedFP16 (paper 004, FP16 mode) on Hopper: Y^T = W · X^T with the weights as wgmma's register A
// operand. Each 64-k tile brings both byte planes of the CTA's 128 weight rows (TMA, 64-byte
// swizzle: conflict-free 16-bit reads) next to the activation tile (TMA, 128-byte swizzle, wgmma's
// B operand); each thread rebuilds the fp16 weights of its A fragments exactly (FORMATS.md) in
// registers. Two warpgroups of 64 weight rows each; 64, 128 or 256 tokens per CTA. The fragments of
// tile kt + 1 are rebuilt while tile kt's wgmma run (two A register sets), so no fp16 tile is ever
// written to shared memory: 1.0-1.19x the smem-B kernel this replaced (docs/perf/gemm-notes.md,
// "register A"). The weights stay the one stored copy whose upper plane the FP8 path reads.
#include <cuda.h>
#include <cuda_fp16.h>

#include <string>

#include "gemm_wgmma.cuh"
#include "gemm_wgmma_launch.cuh"
#include "nestedfp_rebuild.cuh"
#include "nibble/error.h"

namespace nibble::cuda::wg {

// Not in an anonymous namespace: the sm_80 pass (kernel body compiled out) would warn that its
// members are unreferenced.
struct NestedPlanes {
  struct Params {
    CUtensorMap upper, lower;  // [N, K] bytes each; box 64 x 128, 64-byte swizzle
  };
};

namespace {

constexpr int kThreads = 256;                    // two warpgroups
constexpr int kRows = 128;                       // weight rows per CTA: 64 per warpgroup
constexpr int kStages = 4;                       // tiles in the ring
constexpr int kPlaneBytes = kRows * 64;          // one plane of a 64-k tile
constexpr int kWeightBytes = 2 * kPlaneBytes;    // both planes

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define NIBBLE_RACC8(i)                                                                                 \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
// D[64 x 64] (+)= A[64 x 16] · B[16 x 64]: A fp16 from registers (the m16n8k16 A fragment of warp w's
// rows 16w..16w+15), B K-major in shared memory, fp32 accumulate.
__device__ __forceinline__ void wgmma_rega_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : NIBBLE_RACC8(0), NIBBLE_RACC8(8), NIBBLE_RACC8(16), NIBBLE_RACC8(24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

// D[64 x 128] (+)= A[64 x 16] · B[16 x 128]: A fp16 from registers (the m16n8k16 A fragment of warp w's
// rows 16w..16w+15), B K-major in shared memory, fp32 accumulate.
__device__ __forceinline__ void wgmma_rega_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : NIBBLE_RACC8(0), NIBBLE_RACC8(8), NIBBLE_RACC8(16), NIBBLE_RACC8(24), NIBBLE_RACC8(32), NIBBLE_RACC8(40), NIBBLE_RACC8(48), NIBBLE_RACC8(56)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

// D[64 x 256] (+)= A[64 x 16] · B[16 x 256]: A fp16 from registers (the m16n8k16 A fragment of warp w's
// rows 16w..16w+15), B K-major in shared memory, fp32 accumulate.
__device__ __forceinline__ void wgmma_rega_n256(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "{%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
      : NIBBLE_RACC8(0), NIBBLE_RACC8(8), NIBBLE_RACC8(16), NIBBLE_RACC8(24), NIBBLE_RACC8(32), NIBBLE_RACC8(40), NIBBLE_RACC8(48), NIBBLE_RACC8(56), NIBBLE_RACC8(64), NIBBLE_RACC8(72), NIBBLE_RACC8(80), NIBBLE_RACC8(88), NIBBLE_RACC8(96), NIBBLE_RACC8(104), NIBBLE_RACC8(112), NIBBLE_RACC8(120)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}
#undef NIBBLE_RACC8

template <int TN>
__device__ __forceinline__ void wgmma_rega(float (&d)[TN / 2], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  if constexpr (TN == 64) wgmma_rega_n64(d, a, desc_b, accumulate);
  else if constexpr (TN == 128) wgmma_rega_n128(d, a, desc_b, accumulate);
  else wgmma_rega_n256(d, a, desc_b, accumulate);
}

// The compiler does not know that an issued wgmma still reads its A registers: "+r" keeps them
// live (and unmodified) up to this point.
__device__ __forceinline__ void keep_regs(uint32_t (&a)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[s][i])::"memory");
}
template <int N>
__device__ __forceinline__ void keep_acc(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The 16 bits at (row r, byte k) of a 64-byte-swizzled plane: 16-byte chunk k / 16 ^ (r / 2 % 4).
__device__ __forceinline__ uint32_t u16_at(const uint8_t* plane, int r, int k) {
  return *reinterpret_cast<const uint16_t*>(plane + r * 64 + ((((k >> 4) ^ (r >> 1)) & 3) << 4) + (k & 15));
}

// Where a thread's A fragments come from: the planes of each ring slot, and its row in the CTA.
struct PlaneRing {
  const uint8_t* stages;
  const uint64_t* full;
  int stage_bytes, x_bytes, rl;
};

// A[4 k16 steps][4] of tile kt for rows rl and rl + 8: pair q of step s is (row rl + 8 (q & 1),
// k 16 s + 2 t + 8 (q >> 1)) and the k after it, as wgmma's m64k16 A fragment wants it.
__device__ __forceinline__ void fragments(const PlaneRing& r, int kt, uint32_t (&a)[4][4]) {
  const int slot = kt % kStages;
  mbar_wait(const_cast<uint64_t*>(r.full) + slot, (kt / kStages) & 1);
  const uint8_t* up = r.stages + slot * r.stage_bytes + r.x_bytes;
  const uint8_t* lo = up + kPlaneBytes;
  const int t2 = 2 * ((threadIdx.x & 31) & 3);
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {  // bytes: (r0, k), (r0, k + 1), (r1, k), (r1, k + 1)
      const int k = 16 * s + 8 * hh + t2;
      const uint32_t u = u16_at(up, r.rl, k) | u16_at(up, r.rl + 8, k) << 16;
      const uint32_t l = u16_at(lo, r.rl, k) | u16_at(lo, r.rl + 8, k) << 16;
      nestedfp_rebuild(u, l, a[s][2 * hh], a[s][2 * hh + 1]);
    }
}
#endif

template <int TN>
__global__ void __launch_bounds__(kThreads, 1) nested_kernel(tc::MainArgs g, const __grid_constant__ CUtensorMap map_x,
                                                             const __grid_constant__ NestedPlanes::Params p,
                                                             tc::EpilogueArgs e) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int X_BYTES = TN * kRowBytes, STAGE = X_BYTES + kWeightBytes;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* stages = smem_raw + ((1024 - (tc::smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(stages + kStages * STAGE);

  const int m0 = blockIdx.x * TN, n0 = blockIdx.y * kRows, split = blockIdx.z;
  const int kt0 = split * g.tiles_per_split;
  const int nk = min(g.tiles_per_split, g.k_tiles - kt0);
  const int wgi = threadIdx.x >> 7, tid = threadIdx.x & 127;
  const int lane = tid & 31;
  const int row = n0 + 64 * wgi + 16 * (tid >> 5) + (lane >> 2);  // D row g; + 8 for the other
  const PlaneRing planes{stages, full, STAGE, X_BYTES, row - n0};
  const bool issuer = threadIdx.x == 0;
  auto load = [&](int kt) {  // issuer only: tile kt's activations and planes into its slot
    uint8_t* st = stages + (kt % kStages) * STAGE;
    uint64_t* bar = full + kt % kStages;
    mbar_expect_bytes(bar, STAGE);
    tma_load_2d(st, &map_x, (kt0 + kt) * kBK, m0, bar);
    tma_load_2d(st + X_BYTES, &p.upper, (kt0 + kt) * 64, n0, bar);
    tma_load_2d(st + X_BYTES + kPlaneBytes, &p.lower, (kt0 + kt) * 64, n0, bar);
  };

  if (issuer) {
    for (int s = 0; s < kStages; ++s) mbar_init(full + s, 1);
    tc::fence_mbar_init();
  }
  __syncthreads();
  if (issuer)
    for (int kt = 0; kt < kStages - 1 && kt < nk; ++kt) load(kt);

  // (a warpgroup past N computes on zero-filled rows and stores nothing)
  float acc[TN / 2];  // not zeroed: the first wgmma overwrites
  uint32_t a0[4][4], a1[4][4];
  fragments(planes, 0, a0);

  // Tile kt runs from cur while tile kt + 1's fragments are rebuilt in nxt.
  // (fragments(kt) already waited for tile kt's slot: its planes and activations share the barrier)
  auto step = [&](int kt, uint32_t (&cur)[4][4], uint32_t (&nxt)[4][4]) {
    const int slot = kt % kStages;
    keep_regs(cur);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) wgmma_rega<TN>(acc, cur[s], sw128_desc(stages + slot * STAGE, s), kt > 0 || s > 0);
    wgmma_commit();
    wgmma_wait<1>();  // tile kt - 1 done: its A registers (nxt) and its slot are free
    __syncthreads();  // ... in both warpgroups
    if (issuer && kt + kStages - 1 < nk) load(kt + kStages - 1);
    if (kt + 1 < nk) {
      keep_regs(nxt);
      fragments(planes, kt + 1, nxt);
    }
  };
  for (int kt = 0; kt < nk; kt += 2) {
    step(kt, a0, a1);
    if (kt + 1 < nk) step(kt + 1, a1, a0);
  }
  wgmma_wait<0>();
  keep_acc(acc);

  // D row (weight row) row + 8 h, column (token) 8 j + 2 t + c: register 4 j + 2 h + c.
  const int t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int n = row + 8 * h;
    if (n >= e.N) continue;
#pragma unroll
    for (int j = 0; j < TN / 8; ++j)
#pragma unroll
      for (int cc = 0; cc < 2; ++cc) {
        const int m = m0 + 8 * j + 2 * t + cc;
        if (m >= e.M) continue;
        const float v = acc[4 * j + 2 * h + cc];
        if (e.partial) {
          e.partial[(int64_t(split) * e.M + m) * e.N + n] = v;
        } else {
          const float sc = e.alpha * (e.row_scale ? e.row_scale[m] : 1.0f);
          e.y[int64_t(m) * e.N + n] = __half_as_ushort(__float2half_rn(v * sc));
        }
      }
  }
#else
  __trap();  // launched only on sm_90 (supported())
#endif
}

// The tile shape for launch_cfg (gemm_wgmma_launch.cuh): TN tokens x 128 weight rows per CTA.
template <int TN>
struct NestedCfg {
  static constexpr int BM = TN, BN = kRows, THREADS = kThreads;
  // Split-K by estimated time (auto_splits) at 256 tokens, where a CTA takes ~0.9 us per 64-wide
  // k-tile on an H100 (docs/perf/nestedfp16-pipeline-2026-11-24.md); the smaller tiles (M <= 128)
  // stream weights from DRAM and keep the default rule.
  static constexpr double KTILE_US = TN == 256 ? 0.9 : 0.0;
  static constexpr int SMEM = 1024 + kStages * (TN * kRowBytes + kWeightBytes) + kStages * 8;
  static_assert(SMEM <= kSmemLimit, "ring too large");
};

template <int TN>
void launch_tn(const tc::Problem& pr, const NestedPlanes::Params& p, GemmWorkspace& ws, int split_k,
               cudaStream_t stream) {
  launch_cfg<NestedCfg<TN>, NestedPlanes, nested_kernel<TN>>(pr, p, ws, split_k, stream);
}

}  // namespace

void nestedfp16(const uint16_t* x, int M, const uint8_t* upper, const uint8_t* lower, int N, int K, uint16_t* y,
                GemmWorkspace& ws, int split_k, cudaStream_t stream) {
  if (M < 1 || N < 8 || N % 8 != 0 || K < 64 || K % 64 != 0)
    throw Error("nestedfp wgmma GEMM: unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " (need M >= 1, N a multiple of 8, K a multiple of 64)");
  const tc::Problem pr{reinterpret_cast<const uint8_t*>(x), int64_t(K) * 2, M, N, nullptr, 1.0f, y};
  const NestedPlanes::Params p{
      tensor_map_2d(upper, 1, uint64_t(K), uint64_t(N), uint64_t(K), 64, kRows, Swizzle::b64, "nestedfp upper plane"),
      tensor_map_2d(lower, 1, uint64_t(K), uint64_t(N), uint64_t(K), 64, kRows, Swizzle::b64, "nestedfp lower plane")};
  if (M > 128) launch_tn<256>(pr, p, ws, split_k, stream);
  else if (M > 64) launch_tn<128>(pr, p, ws, split_k, stream);
  else launch_tn<64>(pr, p, ws, split_k, stream);
}

}  // namespace nibble::cuda::wg

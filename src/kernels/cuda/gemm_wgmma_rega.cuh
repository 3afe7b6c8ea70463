#pragma once
// The register-A wgmma GEMM main loop (sm_90a): Y^T = W · X^T with the weights as wgmma's A
// operand, decoded in registers, and the activations as its B operand (TMA, 128-byte swizzle).
// Each 64-k tile brings the CTA's raw weight bytes for 128 weight rows (a weight policy, below)
// next to the activation tile into one ring slot; every thread decodes its own A fragments of tile
// kt + 1 while tile kt's four wgmma run (two A register sets), so no fp16 weight tile is ever
// written to or read from shared memory. Two warpgroups of 64 weight rows each; 64, 128 or 256
// tokens per CTA by M. Used by NestedFP16 (gemm_wgmma_nestedfp.cu) and the W4 formats
// (gemm_wgmma_w4a16.cu), each 1.0-1.7x the kernels with a dequantized fp16 weight tile in shared
// memory they replaced (docs/perf/gemm-notes.md, "register A", "register A for W4").
//
// Weight policy interface (WOp): Params (its tensor maps); kRawBytes (a ring slot's weight part),
// kRegaStages, kExtraBytes (constant tables) and init(extra) once per CTA; raw_bytes(p) the bytes
// load_raw brings; load_raw(dst, p, n0, kt, bar) issues (one thread) the TMA of k-tile kt for weight
// rows n0 .. n0 + 127; fragments(w, p, rl, extra, a) decodes, as a thread whose D rows are rl and
// rl + 8 of the CTA, its A fragments a[k16 step][4] from a slot's weight bytes w: pair q of step s
// is (row rl + 8 (q & 1), k 16 s + 2 t + 8 (q >> 1)) and the k after it, t = lane % 4.
#include <cuda.h>
#include <cuda_fp16.h>

#include "gemm_wgmma_core.cuh"
#include "gemm_wgmma_launch.cuh"

namespace nibble::cuda::wg {

constexpr int kRegaThreads = 256;  // two warpgroups
constexpr int kRegaRows = 128;     // weight rows per CTA: 64 per warpgroup

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

#endif

template <class WOp, int TN>
__global__ void __launch_bounds__(kRegaThreads, 1)
    rega_kernel(tc::MainArgs g, const __grid_constant__ CUtensorMap map_x,
                const __grid_constant__ typename WOp::Params p, tc::EpilogueArgs e) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kStages = WOp::kRegaStages, X_BYTES = TN * kRowBytes, STAGE = X_BYTES + WOp::kRawBytes;
  static_assert(STAGE % 1024 == 0, "every slot's activation tile 1024-byte aligned (128-byte swizzle)");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* stages = smem_raw + ((1024 - (tc::smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(stages + kStages * STAGE);
  float* col_scale = reinterpret_cast<float*>(full + kStages);  // [TN]: alpha x row_scale of each token
  uint8_t* extra = reinterpret_cast<uint8_t*>(col_scale + TN);
  WOp::init(extra);

  const int m0 = blockIdx.x * TN, n0 = blockIdx.y * kRegaRows, split = blockIdx.z;
  // Read in the epilogue, after the main loop's barriers. From shared memory, not per output from
  // global: those loads may alias the stores of y, so they ran one after another (W4A4 at 256
  // tokens spent ~18% of the GEMM in them; docs/perf/gemm-notes.md, "register A for W4").
  for (int i = threadIdx.x; i < TN; i += kRegaThreads)
    col_scale[i] = e.alpha * (e.row_scale && m0 + i < e.M ? e.row_scale[m0 + i] : 1.0f);
  const int kt0 = split * g.tiles_per_split;
  const int nk = min(g.tiles_per_split, g.k_tiles - kt0);
  const int wgi = threadIdx.x >> 7, tid = threadIdx.x & 127;
  const int lane = tid & 31;
  const int rl = 64 * wgi + 16 * (tid >> 5) + (lane >> 2);  // D row (weight row) in the CTA; + 8 for the other
  const int row = n0 + rl;
  const bool issuer = threadIdx.x == 0;
  const uint32_t stage_bytes = X_BYTES + WOp::raw_bytes(p);
  auto load = [&](int kt) {  // issuer only: tile kt's activations and weights into its slot
    uint8_t* st = stages + (kt % kStages) * STAGE;
    uint64_t* bar = full + kt % kStages;
    mbar_expect_bytes(bar, stage_bytes);
    tma_load_2d(st, &map_x, (kt0 + kt) * kBK, m0, bar);
    WOp::load_raw(st + X_BYTES, p, n0, kt0 + kt, bar);
  };
  // Waits for tile kt's slot (its weights and activations share the barrier), then decodes.
  auto fragments = [&](int kt, uint32_t(&a)[4][4]) {
    const int slot = kt % kStages;
    mbar_wait(full + slot, (kt / kStages) & 1);
    WOp::fragments(stages + slot * STAGE + X_BYTES, p, rl, extra, a);
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
  fragments(0, a0);

  // Tile kt runs from cur while tile kt + 1's fragments are decoded into nxt.
  auto step = [&](int kt, uint32_t(&cur)[4][4], uint32_t(&nxt)[4][4]) {
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
      fragments(kt + 1, nxt);
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
          e.y[int64_t(m) * e.N + n] = __half_as_ushort(__float2half_rn(v * col_scale[m - m0]));
        }
      }
  }
#else
  __trap();  // launched only on sm_90 (supported())
#endif
}

// The tile shape for launch_cfg (gemm_wgmma_launch.cuh): TN tokens x 128 weight rows per CTA.
template <class WOp, int TN>
struct RegaCfg {
  static constexpr int BM = TN, BN = kRegaRows, THREADS = kRegaThreads;
  // Split-K by estimated time (auto_splits) at 256 tokens, where a CTA takes ~0.9 us per 64-wide
  // k-tile on an H100 (docs/perf/nestedfp16-pipeline-2026-11-24.md); the smaller tiles (M <= 128)
  // stream weights from DRAM and keep the default rule.
  static constexpr double KTILE_US = TN == 256 ? 0.9 : 0.0;
  static constexpr int SMEM =
      1024 + WOp::kRegaStages * (TN * kRowBytes + WOp::kRawBytes) + WOp::kRegaStages * 8 + TN * 4 + WOp::kExtraBytes;
  static_assert(SMEM <= kSmemLimit, "ring too large");
};

// 256 tokens per CTA from 129 rows, 128 from 65, else 64.
template <class WOp>
void launch_rega(const tc::Problem& pr, const typename WOp::Params& p, GemmWorkspace& ws, int split_k,
                 cudaStream_t stream) {
  if (pr.M > 128) launch_cfg<RegaCfg<WOp, 256>, WOp, rega_kernel<WOp, 256>>(pr, p, ws, split_k, stream);
  else if (pr.M > 64) launch_cfg<RegaCfg<WOp, 128>, WOp, rega_kernel<WOp, 128>>(pr, p, ws, split_k, stream);
  else launch_cfg<RegaCfg<WOp, 64>, WOp, rega_kernel<WOp, 64>>(pr, p, ws, split_k, stream);
}

}  // namespace nibble::cuda::wg

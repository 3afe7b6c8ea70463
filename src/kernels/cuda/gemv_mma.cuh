#pragma once
// Tensor-core decode GEMV for M = 1..16 (paper 002's large-M dispatch): the weights are decoded in
// registers straight into mma.sync m16n8k16 A fragments (fp16), X rows are the B operand (one n8
// tile per 8 tokens), FP32 accumulators; the group scales are applied in fp16 to the decoded
// weights (NVFP4, MXFP4) or to each group's FP32 sum (the other formats), see "Scales" below. The decode
// work per weight does not grow with M, which is what keeps M = 16 near M = 1.
//
// Kernel layout ("mma layout", repack_mma_tiles): per 16-row block and 64-element chunk of K,
// 512 bytes, 16 per lane. Lane (g = lane / 4, t = lane % 4) holds, for tile j = 0..3, one 32-bit
// word: rows g and g + 8 at k = 64c + mma_tile_k(j, t) + {0..3} (repack.h: 32 (j / 2) + 8t +
// 4 (j % 2)). Nibble p of that word: row g + 8 (p & 1), k offset 2 (p >> 1 & 1) + (p >> 2); so
// decode pair p (nibbles p, p + 4) is A register a_p. The mma's k slots {2t, 2t+1, 2t+8, 2t+9}
// stand for those four k, so a lane's B fragments of tiles 2h and 2h + 1 are one 16-byte load of
// X: at 16 tokens the L1 wavefronts of X (one per token row a load touches) were the kernel's
// limit under ncu with one 8-byte load per tile. The FP32-scaled policies' groups (64, 128) hold
// whole chunks; an NVFP4 lane's tiles 2h, 2h + 1 lie in block 2h + t / 2 of the chunk (tile_meta).
// The policies that scale in fp16 (kScaledH) follow each chunk's 512 bytes with its rows' scales
// (kMmaChunkBytes): NVFP4 formats their 4 scale bytes per row, MXFP4 2 bytes per row (its blocks'
// scales as fp16 exponents relative to the tensor's largest, gemv_mxfp4.cu).
//
// CTA: RB 16-row blocks (a.mma_row_blocks); its 8 warps take interleaved steps of U chunks of K,
// each chunk for all RB blocks, so one B fragment of X serves RB blocks (X is read N / 16 / RB
// times in all: with one block that traffic is what made M = 16 slow). Each warp loads its next
// step's chunks before decoding the current ones (register double buffer), then the warps add up
// through shared memory. (A deeper cp.async ring in shared memory was measured no faster at any
// depth and slower overall: the kernel is bound by instruction issue, not by loads in flight.)
// Split K (a.k_splits > 1, sm_90): a cluster of that many CTAs shares the row blocks, its warps
// interleaving chunks as one group, and the CTAs add their sums through distributed shared memory:
// shapes with few row blocks (the down and o projections: N / 32 = 128 CTAs for 132 SMs at 16
// tokens) otherwise leave SMs idle and give each warp a long chain of dependent steps.
// At one row X is first copied into shared memory (kSmemX, gemv.cuh's kSmemXMaxBytes).
//
// Scales: a policy with kScaledH multiplies its decoded fp16 pairs by the group scale in fp16
// inside decode_h, exactly (docs/kernels.md: the products fit fp16's grid), so the mma
// accumulators run over the whole row and no FP32 scale work is left per tile; other policies'
// tiles of one scale group add up in the mma accumulators and their FP32 sum is scaled once.
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include "decode.cuh"
#include "gemv.cuh"
#include "gemv_args.h"
#include "mma.cuh"
#include "repack.h"

namespace nibble::cuda::detail {

// Bytes per block and chunk in the tile layout: the scaled policies' chunks carry the block's
// 16 rows x kTileScaleBytes after the 512 code bytes (repack_mma_tiles), the others read their
// row-major metadata plane.
template <class F>
constexpr int mma_chunk_bytes_of() {
  if constexpr (F::kScaledH) return int(mma_chunk_bytes(F::kTileScaleBytes));
  else return 512;
}
template <class F>
constexpr int kMmaChunkBytes = mma_chunk_bytes_of<F>();

// Bytes of one row's metadata element per scale group (F::kMetaBytes) where F scales in FP32; 0 for
// the policies that scale in fp16 (their scales lie in the tile layout).
template <class F>
constexpr int meta_bytes_of() {
  if constexpr (F::kScaledH) return 0;
  else return F::kMetaBytes;
}

// Row r's scale bytes of a chunk in the tile layout (scales: the chunk's bytes after its codes).
template <class F>
__device__ __forceinline__ uint32_t tile_scale_word(const uint8_t* scales, int r) {
  if constexpr (F::kTileScaleBytes == 4) return __ldg(reinterpret_cast<const uint32_t*>(scales) + r);
  else return __ldg(reinterpret_cast<const unsigned short*>(scales) + r);
}

// The byte permutation tile_meta applies to lane t's NVFP4 scale words (4 blocks of 16 a chunk):
// block t / 2 of each half into both bytes of that half, i.e. blocks (s, s, 2 + s, 2 + s), s = t / 2.
__device__ __forceinline__ uint32_t tile_scale_sel(int t) { return 0x2200u + uint32_t(t >> 1) * 0x1111u; }

// One row pair's metadata of a chunk from the tile layout's scale words (tile_scale_word of rows g
// and g + 8): meta[row g / g + 8][first / second half of the chunk]. NVFP4: each half's two bytes
// both hold the block of this lane's tiles (sel: tile_scale_sel); MXFP4 (a block of 32 a half): its
// byte. The halves stay two ends of one word, which chunk_scales_h joins again for free.
template <class F>
__device__ __forceinline__ void tile_meta(uint32_t s0, uint32_t s1, uint32_t sel, typename F::Meta (&meta)[2][2]) {
  constexpr int kHalfBits = 4 * F::kTileScaleBytes;
  constexpr uint32_t kMask = (1u << kHalfBits) - 1u;
  if constexpr (F::kTileScaleBytes == 4) s0 = __byte_perm(s0, 0, sel), s1 = __byte_perm(s1, 0, sel);
  meta[0][0].s = s0 & kMask, meta[0][1].s = s0 >> kHalfBits, meta[1][0].s = s1 & kMask, meta[1][1].s = s1 >> kHalfBits;
}

// Shared memory of one CTA for the final reduction.
constexpr size_t mma_red_bytes(int row_blocks, int nt) { return size_t(kWarps) * row_blocks * nt * 4 * 32 * sizeof(float); }

// How a warp gets X's B fragments at two token tiles (M > 8), X not staged:
// - kXAhead (the fp16-scaled policies, nvfp4 and mxfp4): loaded with the weights one step ahead,
//   into the registers acc2 leaves free. ncu on gate_up at M = 16 had found the warps stalled on
//   loads right before their mma (L1 hit rate 45%, one issue every 6.9 cycles).
// - else right before their mma, from global memory (kXAhead there spilled and measured 0-6%
//   slower). fp4-g128 copied X into a per-warp cp.async ring in shared memory from 2026-11-28; once
//   X came in 16-byte fragments these loads were 1.01-1.14x faster than the ring at 16 tokens
//   (docs/perf/xfrag16-2026-11-30.md).

// A policy scaled in FP32 may decode its odd pairs (the rows g + 8 of its A fragments) times a power
// of two, kOddPairsTimes, where that saves instructions (INT4: 16 (q - z) without a shift); those
// rows' group sums are then scaled by its inverse, exactly.
template <class F, class = void>
struct OddPairsTimes {
  static constexpr float value = 1.0f;
};
template <class F>
struct OddPairsTimes<F, std::void_t<decltype(F::kOddPairsTimes)>> {
  static constexpr float value = F::kOddPairsTimes;
};
// An FP32-scaled policy that reads X from global memory at two token tiles may set kMmaTwoChunks:
// two chunks per warp, block and buffer at two blocks and two tiles, twice the bytes in flight
// within the same 128 registers. Set by int4-g128 and nf4 (H200, M = 16: int4-g128 down 1.15x, q/k/v
// 1.04x, o 1.03x, gate/up 0.99x; nf4 1.04-1.12x, its cluster kernel with 20 bytes of spills; batch
// 16 decode +0.8% and +1.0%, docs/perf/attn-cluster-2026-11-29.md). RaZeR FP4 spilled there (16-36
// bytes) and does not set it.
template <class F, class = void>
struct MmaTwoChunksOpt : std::false_type {};
template <class F>
struct MmaTwoChunksOpt<F, std::void_t<decltype(F::kMmaTwoChunks)>> : std::bool_constant<F::kMmaTwoChunks> {};
template <class F>
constexpr bool mma_two_chunks() { return !F::kScaledH && MmaTwoChunksOpt<F>::value; }

// Stores the outputs of the CTA's row blocks blk0 ...: value v (block, token tile, register) of
// each lane is sum(v), for v = v0, v0 + vstep, ... (one warp per value: a silu pair's rows meet
// through a shuffle).
template <class F, int NT, int RB, class Sum>
__device__ __forceinline__ void mma_store(const GemvArgs& a, int v0, int vstep, int lane, int blk0, Sum sum) {
  constexpr int kVals = RB * NT * 4;
  const int g = lane >> 2, t = lane & 3;
  for (int v = v0; v < kVals; v += vstep) {
    const float s = sum(v);
    const int b = v / (NT * 4), n = v / 4 % NT, i = v % 4;
    const int token = n * 8 + 2 * t + (i & 1), row = (blk0 + b) * 16 + g + (i < 2 ? 0 : 8);
    if (a.silu_pairs || a.rope_d) {  // the pair's second row (g + 1) sits 4 lanes over
      const float su = __shfl_xor_sync(0xFFFFFFFFu, s, 4);
      if ((g & 1) == 0 && token < a.M) store_rows2(a, token, row, s, su, F::kOutFactor);
    } else if (token < a.M && row < a.N) {
      store_y(a, token, row, s, F::kOutFactor);
    }
  }
}

// Value v of one lane summed over the W warps' accumulators in red ([W][kVals][32]: value (block,
// token tile, register) of each lane), in warp order.
template <int kVals, int W>
__device__ __forceinline__ float warps_sum(const float* red, int v, int lane) {
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < W; ++w) s += red[(w * kVals + v) * 32 + lane];
  return s;
}

// After each of the W warps of a CTA wrote its accumulators to red and a barrier: the warps add
// them up and store.
template <class F, int NT, int RB, int W>
__device__ __forceinline__ void mma_store_sums(const GemvArgs& a, const float* red, int warp, int lane, int blk0) {
  mma_store<F, NT, RB>(a, warp, W, lane, blk0, [&](int v) { return warps_sum<RB * NT * 4, W>(red, v, lane); });
}

// One 64-element chunk of each of the RB row blocks: every 16-wide tile decoded into A fragments
// and multiplied with X's B fragments (xfrag(n, h): token tile n, tiles 2h and 2h + 1 as one uint4).
// wq[b]: this lane's 16 bytes of block b; meta[b][row g / g + 8][first / second half of the chunk].
// Unscaled policies sum the chunk (inside one scale group) in d, then scale it into acc.
template <class F, int NT, int RB, class XFrag>
__device__ __forceinline__ void mma_chunk(const GemvArgs& a, const uint4 (&wq)[RB],
                                          const typename F::Meta (&meta)[RB][2][2], XFrag xfrag,
                                          float (&acc)[RB][NT][4], float (&acc2)[RB][NT][4]) {
  uint32_t S[RB][2][4];  // scaled policies: the chunk's block scales per block and row, as fp16 pairs
  if constexpr (F::kScaledH)
#pragma unroll
    for (int b = 0; b < RB; ++b)
#pragma unroll
      for (int r = 0; r < 2; ++r) F::chunk_scales_h(meta[b][r][0], meta[b][r][1], S[b][r]);
  float d[RB][NT][4];
  if constexpr (!F::kScaledH)
#pragma unroll
    for (int b = 0; b < RB; ++b)
#pragma unroll
      for (int n = 0; n < NT; ++n) d[b][n][0] = d[b][n][1] = d[b][n][2] = d[b][n][3] = 0.0f;
  uint4 xh[NT];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int hh = j >> 1;
    if (j % 2 == 0)
#pragma unroll
      for (int n = 0; n < NT; ++n) xh[n] = xfrag(n, hh);
    uint2 xb[NT];
#pragma unroll
    for (int n = 0; n < NT; ++n) xb[n] = j % 2 ? make_uint2(xh[n].z, xh[n].w) : make_uint2(xh[n].x, xh[n].y);
#pragma unroll
    for (int b = 0; b < RB; ++b) {
      const uint4& q = wq[b];
      const uint32_t w = j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w;
      uint32_t A[4];
      if constexpr (F::kScaledH)
        F::decode_h(w, meta[b][0][hh], meta[b][1][hh], S[b][0][j], S[b][1][j], a, A);
      else
        F::decode_h(w, meta[b][0][0], meta[b][1][0], a, A);
#pragma unroll
      for (int n = 0; n < NT; ++n)
        mma_16816(!F::kScaledH ? d[b][n] : (j & 1) && NT == 1 ? acc2[b][n] : acc[b][n], A, xb[n].x, xb[n].y);
    }
    if constexpr (!F::kScaledH) {
      if (j == 3) {  // the chunk's FP32 sum times its group's scale
#pragma unroll
        for (int b = 0; b < RB; ++b) {
          const float s0 = F::scale(meta[b][0][0], 0, a);
          const float s1 = F::scale(meta[b][1][0], 0, a) * (1.0f / OddPairsTimes<F>::value);
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            acc[b][n][0] = fmaf(d[b][n][0], s0, acc[b][n][0]);
            acc[b][n][1] = fmaf(d[b][n][1], s0, acc[b][n][1]);
            acc[b][n][2] = fmaf(d[b][n][2], s1, acc[b][n][2]);
            acc[b][n][3] = fmaf(d[b][n][3], s1, acc[b][n][3]);
          }
        }
      }
    }
  }
}

// F: a GEMV policy with kChunkK == 32 that also has decode_h (four fp16 pairs of one word; with
// kScaledH, already times the group scales it is given) and kScaledH. NT: token tiles of 8
// (M <= 8 or <= 16); RB: 16-row blocks per CTA.
// kCluster: launched in clusters of a.k_splits CTAs (else the kernel ignores a.k_splits, so that its
// chunk stride stays a constant: a runtime one measured 2-4% slower at M = 2-4).
template <class F, int NT, int RB, bool kSmemX, bool kCluster>
__global__ void __launch_bounds__(kThreads, mma_ctas_per_sm(NT, RB)) gemv_mma_kernel(const GemvArgs a) {
  // Chunks per warp, block and buffer, with the register budget of mma_ctas_per_sm (gemv_args.h),
  // as measured best (docs/perf/tune-2026-11-23.md): one block, one chunk, 3 CTAs per SM; two
  // blocks and one token tile, two chunks, 2 CTAs; two token tiles, one chunk, 2 CTAs (at 158
  // registers, two chunks ran one CTA per SM, a quarter of the warps); four blocks and two tiles, 1.
  // Except two blocks and two tiles where the policy sets kMmaTwoChunks (mma_two_chunks).
  constexpr int U = NT == 1 && RB == 2 ? 2 : NT == 2 && RB == 2 && mma_two_chunks<F>() ? 2 : 1;
  // FP32-scaled policies sum a chunk's tiles in the mma before scaling it, at one or two token tiles
  // (one FMA per chunk instead of one per tile: M = 16 1.02-1.15x for int4-g128, nf4 and fp4-g128,
  // 2026-11-24); their metadata is block-major (GemvArgs::scales: per 16-row block, per group, the
  // block's 16 elements of meta_bytes).
  static_assert(F::kScaledH || F::kGroupK % 64 == 0, "an FP32 scale group holds whole chunks");
  constexpr int meta_bytes = meta_bytes_of<F>();
  extern __shared__ float red[];  // [kWarps][RB * NT * 4][32] (after the loop), then (kSmemX) X [M, K]
  uint4* xs = reinterpret_cast<uint4*>(red + mma_red_bytes(RB, NT) / sizeof(float));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int nchunks = a.K / 64, nblocks = (a.N + 15) / 16;
  // a.k_splits CTAs (one cluster, consecutive along x) share the row blocks: their warps take
  // interleaved chunks as one group of a.k_splits * 8 warps
  const int parts = kCluster ? a.k_splits : 1, part = blockIdx.x % parts;
  const int blk0 = blockIdx.x / parts * RB;
  const int group_warps = kWarps * parts;
  const uint8_t* qblk[RB];
  const uint8_t* srow0[RB];  // FP32-scaled: the metadata of row g in group 0 (row g + 8: 8 elements on)
#pragma unroll
  for (int b = 0; b < RB; ++b) {  // blocks past the last read the last one and store nothing
    const size_t blk = size_t(min(blk0 + b, nblocks - 1));
    qblk[b] = a.q + blk * nchunks * kMmaChunkBytes<F> + lane * 16;
    srow0[b] = a.scales + (blk * (a.K / F::kGroupK) * 16 + g) * meta_bytes;
  }
  const uint32_t scale_sel = tile_scale_sel(t);

  // This lane's B fragments: tiles 2h and 2h + 1 of token n * 8 + g are the 8 halves at k =
  // 64c + 32h + 8t (xrow[n][8c + 4h]). Tokens past M read the last row: a token's column of the
  // mma is its own, and those columns are never stored.
  const uint4* xrow[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int token = n * 8 + g;
    const __half* x = kSmemX ? reinterpret_cast<const __half*>(xs) : a.x;
    xrow[n] = reinterpret_cast<const uint4*>(x + size_t(min(token, a.M - 1)) * a.K + 8 * t);
  }
  // Scaled policies accumulate every tile in the mma accumulators: with one token tile even and odd
  // tiles in two sets, two dependency chains instead of one, added at the end (two token tiles are
  // two chains already).
  float acc[RB][NT][4], acc2[RB][NT][4];
#pragma unroll
  for (int b = 0; b < RB; ++b)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[b][n][i] = acc2[b][n][i] = 0.0f;

  // X's B fragments at two token tiles (kXAhead above).
  constexpr bool kXAhead = F::kScaledH && NT == 2 && !kSmemX;
  constexpr int kUS = F::kScaledH ? U : 1, kUM = F::kScaledH ? 1 : U;
  struct Stage {
    uint4 wq[U][RB];
    uint32_t sw[kUS][RB][2];               // scaled policies: the scale words of rows g, g + 8
    typename F::Meta meta[kUM][RB][2][2];  // others: [u][block][row g / g + 8][0] (one group a chunk)
    uint4 xb[kXAhead ? U : 1][2][NT];      // kXAhead: [u][half h][token tile n]
  };
  auto load = [&](Stage& st, int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = min(c0 + group_warps * u, nchunks - 1);  // a clamped duplicate is loaded, never used
#pragma unroll
      for (int b = 0; b < RB; ++b) {
        st.wq[u][b] = load_stream(qblk[b] + size_t(c) * kMmaChunkBytes<F>);
        if constexpr (F::kScaledH) {  // split into Meta only where decoded (no split copy per step)
          const uint8_t* sc = qblk[b] - lane * 16 + size_t(c) * kMmaChunkBytes<F> + 512;
          st.sw[u][b][0] = tile_scale_word<F>(sc, g), st.sw[u][b][1] = tile_scale_word<F>(sc, g + 8);
        } else {  // 8 rows' elements of one group in one sector
          const uint8_t* grp = srow0[b] + c / (F::kGroupK / 64) * 16 * meta_bytes;
          st.meta[u][b][0][0] = F::load_meta(grp, a, 0);
          st.meta[u][b][1][0] = F::load_meta(grp + 8 * meta_bytes, a, 0);
        }
      }
    }
  };
  // X is the previous kernel's output: only after pdl_wait. kXAhead: into the stage's registers.
  auto load_x = [&](Stage& st, int c0) {
    if constexpr (kXAhead) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = min(c0 + group_warps * u, nchunks - 1);
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int n = 0; n < NT; ++n) st.xb[u][h][n] = __ldg(xrow[n] + 8 * c + 4 * h);
      }
    }
  };
  const int step = group_warps * U;
  auto compute = [&](const Stage& st, int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + group_warps * u;
      if (c >= nchunks) break;
      typename F::Meta ms[RB][2][2];  // scaled policies: split here from the whole words
      const auto& meta = [&]() -> const typename F::Meta(&)[RB][2][2] {
        if constexpr (F::kScaledH) {
#pragma unroll
          for (int b = 0; b < RB; ++b) tile_meta<F>(st.sw[u][b][0], st.sw[u][b][1], scale_sel, ms[b]);
          return ms;
        } else {
          return st.meta[u];
        }
      }();
      mma_chunk<F, NT, RB>(
          a, st.wq[u], meta,
          [&](int n, int h) -> uint4 {
            if constexpr (kXAhead) return st.xb[u][h][n];
            else return kSmemX ? xrow[n][8 * c + 4 * h] : __ldg(xrow[n] + 8 * c + 4 * h);
          },
          acc, acc2);
    }
  };
  int c0 = part * kWarps + warp;
  Stage s0, s1;
  if (c0 < nchunks) load(s0, c0);
  pdl_wait();  // the weights are constant: their first chunks load while the previous kernel ends
  pdl_trigger();
  if constexpr (kSmemX) stage_x(a, xs);
  if (c0 < nchunks) load_x(s0, c0);
  // The next step's chunks are in flight while this one is decoded. Scaled policies: the two stages
  // take turns (the loop unrolled by two), so no stage is copied from one step to the next (NVFP4
  // M = 16: 11% fewer instructions); the others copy (their unrolled loops measured up to 8% slower).
  if constexpr (F::kScaledH) {
    for (; c0 < nchunks; c0 += 2 * step) {
      if (c0 + step < nchunks) load(s1, c0 + step), load_x(s1, c0 + step);
      compute(s0, c0);
      if (c0 + step >= nchunks) break;
      if (c0 + 2 * step < nchunks) load(s0, c0 + 2 * step), load_x(s0, c0 + 2 * step);
      compute(s1, c0 + step);
    }
  } else {
    for (; c0 < nchunks; c0 += step) {
      if (c0 + step < nchunks) load(s1, c0 + step);
      compute(s0, c0);
      s0 = s1;
    }
  }

  constexpr int kVals = RB * NT * 4;
#pragma unroll
  for (int b = 0; b < RB; ++b)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        red[(warp * kVals + (b * NT + n) * 4 + i) * 32 + lane] = acc[b][n][i] + acc2[b][n][i];
  __syncthreads();
  if constexpr (!kCluster) {
    mma_store_sums<F, NT, RB, kWarps>(a, red, warp, lane, blk0);
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Split K: each CTA adds up its warps into red[v][lane] (in place: each entry is read and
    // written by the one thread that owns it), then the cluster's CTAs share the outputs, each adding
    // the parts' sums in the same order from their shared memory, so the result does not depend on
    // which CTA ran first. The second sync keeps every CTA's shared memory alive until all have read.
    for (int v = warp; v < kVals; v += kWarps) red[v * 32 + lane] = warps_sum<kVals, kWarps>(red, v, lane);
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    mma_store<F, NT, RB>(a, part * kWarps + warp, group_warps, lane, blk0, [&](int v) {
      float s = 0.0f;
      for (int p = 0; p < parts; ++p) s += cluster.map_shared_rank(red, p)[v * 32 + lane];
      return s;
    });
    cluster.sync();
#endif
  }
}

// a.k_splits (1, 2, 4, 8) CTAs per cluster; more than one only on sm_90 (the dispatcher's check).
template <class F, int NT, int RB, bool kCluster>
void launch_mma_cluster(const GemvArgs& a, cudaStream_t s) {
  const unsigned parts = kCluster ? unsigned(a.k_splits) : 1u;
  const dim3 grid((a.N + 16 * RB - 1) / (16 * RB) * parts);
  if constexpr (NT == 1) {
    if (smem_x_fits(a.M, a.K))
      return launch_pdl_cluster(parts, gemv_mma_kernel<F, 1, RB, true, kCluster>, grid, kThreads,
                                mma_red_bytes(RB, 1) + size_t(a.K) * 2, s, a);
  }
  launch_pdl_cluster(parts, gemv_mma_kernel<F, NT, RB, false, kCluster>, grid, kThreads, mma_red_bytes(RB, NT), s, a);
}

template <class F, int NT, int RB>
void launch_mma_config(const GemvArgs& a, cudaStream_t s) {
  a.k_splits > 1 ? launch_mma_cluster<F, NT, RB, true>(a, s) : launch_mma_cluster<F, NT, RB, false>(a, s);
}

// One, two or four 16-row blocks per CTA (a.mma_row_blocks), one or two token tiles.
template <class F>
void launch_gemv_mma(const GemvArgs& a, cudaStream_t s) {
  const bool two = a.M > 8;
  switch (a.mma_row_blocks) {
    case 1: two ? launch_mma_config<F, 2, 1>(a, s) : launch_mma_config<F, 1, 1>(a, s); break;
    case 2: two ? launch_mma_config<F, 2, 2>(a, s) : launch_mma_config<F, 1, 2>(a, s); break;
    default: two ? launch_mma_config<F, 2, 4>(a, s) : launch_mma_config<F, 1, 4>(a, s); break;
  }
}

}  // namespace nibble::cuda::detail

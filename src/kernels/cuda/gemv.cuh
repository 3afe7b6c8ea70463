#pragma once
// The CUDA-core GEMV shared by every weight format: Y[M, N] = X[M, K] · W[N, K]^T, M <= 16.
//
// Mapping (paper 002 Sec. 5 / App. C): a warp owns R whole rows of W; each lane streams 16-byte
// chunks of those rows (lanes side by side, so a warp reads 512 contiguous bytes per row), decodes
// them in registers and multiplies them with all M activation rows at once, so every weight byte
// is read from memory exactly once for the whole batch (multi-token fusion). Each lane keeps
// R x M x 2 independent FP32 accumulator chains (multi-accumulator); a group's FP32 partial sum is
// multiplied by its scale once at the group's end. One warp reduction per output at the end, then,
// with K splits, one sum over the splitting warps through shared memory.
//
// A format policy F supplies: kChunkK (elements per lane chunk), kChunkBytes (a multiple of 16),
// kGroupK, kLutSize (shared-memory table entries, 0 if none), kOutFactor (multiplied into the
// sums once), q_row_bytes / s_row_bytes (K), Meta, load_meta, scale, lut_entry, and one of two
// decoders: decode8 (FP32 pairs, FP32 products) or decode8_h (fp16 pairs, packed fp16 products:
// see chunk_dot). Optional: kEvenOddPairs (decode8_h pairs elements (0, 2), (4, 6), (1, 3), (5, 7)
// at twice the usual scale; X is paired that way and halved).
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "decode.cuh"
#include "device_info.h"
#include "gemv_args.h"
#include "nibble/cuda/check.h"
#include "nibble/error.h"
#include "pdl.cuh"
#include "reduce.cuh"
#include "rmsnorm_row.cuh"

namespace nibble::cuda::detail {

// Streaming 16-byte load: read once, so do not keep it in L1.
__device__ __forceinline__ uint4 load_stream(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Word i of a chunk held in registers (i is a constant once loops unroll).
template <int NV>
__device__ __forceinline__ uint32_t word_of(const uint4 (&v)[NV], int i) {
  const uint4& q = v[i / 4];
  switch (i % 4) {
    case 0: return q.x;
    case 1: return q.y;
    case 2: return q.z;
    default: return q.w;
  }
}

__device__ __forceinline__ void unpack_x8(uint4 v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = h2bits_to_float2(w[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

// X of a one-row launch staged in shared memory (the kernels' dynamic shared memory, after what
// else they keep there) when it fits in this many bytes: an X load from L1 / L2 just before its use
// was the largest stall of both GEMVs at one row (ncu: 16-35% of the warps' stall samples; staged:
// 4% more tokens/s at batch 1, docs/perf/ab-2026-11-23.md). Longer rows (down projections,
// K = 14336) measured no faster staged, some formats slower (int4-g128 14.1 -> 16.0 us, in a sweep
// on another machine), so they read X as before.
constexpr size_t kSmemXMaxBytes = 16 * 1024;
__host__ __device__ constexpr bool smem_x_fits(int M, int K) { return M == 1 && size_t(K) * 2 <= kSmemXMaxBytes; }

// Copies X [M, K] (K a multiple of 8) into xs; all threads of the CTA, then a barrier.
__device__ __forceinline__ void stage_x(const GemvArgs& a, uint4* xs) {
  const uint4* src = reinterpret_cast<const uint4*>(a.x);
  for (int i = threadIdx.x; i < a.M * a.K / 8; i += blockDim.x) xs[i] = __ldg(src + i);
  __syncthreads();
}

// Whether F decodes to fp16 pairs for the packed-product path (it has decode8_h).
template <class F, class = void>
struct HalfDot : std::false_type {};
template <class F>
struct HalfDot<F, std::void_t<decltype(&F::decode8_h)>> : std::true_type {};

// Whether F's decode8_h pairs the elements of a word as (0, 2), (4, 6), (1, 3), (5, 7) and its values
// are twice the usual scale, so X comes halved (F::kEvenOddPairs: the FP8-conversion decoder);
// otherwise pair p is (p, p + 4).
template <class F, class = void>
struct EvenOddPairs : std::false_type {};
template <class F>
struct EvenOddPairs<F, std::void_t<decltype(F::kEvenOddPairs)>> : std::bool_constant<F::kEvenOddPairs> {};

// X's 8 halves re-paired like F's decoder pairs.
template <class F>
__device__ __forceinline__ void pair_x8(uint4 v, uint32_t (&x)[4]) {
  if constexpr (EvenOddPairs<F>::value) {
    const uint32_t h = 0x38003800u;  // 0.5 in both halves
    x[0] = hmul2_bits(__byte_perm(v.x, v.y, 0x5410u), h), x[1] = hmul2_bits(__byte_perm(v.z, v.w, 0x5410u), h);
    x[2] = hmul2_bits(__byte_perm(v.x, v.y, 0x7632u), h), x[3] = hmul2_bits(__byte_perm(v.z, v.w, 0x7632u), h);
  } else {
    x[0] = __byte_perm(v.x, v.z, 0x5410u), x[1] = __byte_perm(v.x, v.z, 0x7632u);
    x[2] = __byte_perm(v.y, v.w, 0x5410u), x[3] = __byte_perm(v.y, v.w, 0x7632u);
  }
}

// stage_x for the CUDA-core GEMV: X of the fp16-pair formats goes into shared memory already
// paired like their decoders, so the loop reads its pairs as they are where each warp re-paired
// every unit it read (4 PRMTs per 8 elements): one-row qkv / o / gate-up of the Llama-3.1-8B shape
// 2-7% faster for the FP4 formats, end to end +1.3 to +2.7% at batch 1
// (docs/perf/gemv-staged-pairs-2026-11-27.md).
template <class F>
__device__ __forceinline__ void stage_x_paired(const GemvArgs& a, uint4* xs) {
  if constexpr (HalfDot<F>::value) {
    const uint4* src = reinterpret_cast<const uint4*>(a.x);
    for (int i = threadIdx.x; i < a.M * a.K / 8; i += blockDim.x) {
      uint32_t x[4];
      pair_x8<F>(__ldg(src + i), x);
      xs[i] = make_uint4(x[0], x[1], x[2], x[3]);
    }
    __syncthreads();
  } else {
    stage_x(a, xs);
  }
}

// linear_rmsnorm's X, computed by the CTA itself (a.norm_res set): the add + RMSNorm of the
// residual row in rmsnorm_row.cuh's order, so X has the bits ops::rmsnorm_of_sum would give it,
// without a kernel of its own between the o projection and gate/up. Every thread holds its
// elements (at most 4 virtual threads x 4) in registers: rows up to kNormFusedMaxK.
static_assert(size_t(kNormFusedMaxK) * 2 <= kSmemXMaxBytes, "a normed X must fit the staged X's shared memory");
struct NormedX {
  static constexpr int VI = kNormThreads / kThreads, PER = kNormFusedMaxK / kNormThreads;
  float v[VI][PER], w[VI][PER];

  // Before the PDL wait: the residual row and the norm weights.
  __device__ __forceinline__ void load_res_w(const GemvArgs& a) {
    const int H = a.K, VT = norm_virtual_threads(H);
#pragma unroll
    for (int i = 0; i < VI; ++i)
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        const int t = threadIdx.x + kThreads * i, idx = t + VT * j;
        const bool ok = t < VT && idx < H;
        v[i][j] = ok ? a.norm_res[idx] : 0.0f;
        w[i][j] = ok ? __ldg(a.norm_w + idx) : 0.0f;
      }
  }
  // After it: adds the delta, sums, and writes X into xs, paired like stage_x_paired (then a barrier).
  template <class F>
  __device__ __forceinline__ void stage(const GemvArgs& a, uint4* xs, float* scratch) {
    const int H = a.K, VT = norm_virtual_threads(H);
#pragma unroll
    for (int i = 0; i < VI; ++i) {
      const int t = threadIdx.x + kThreads * i;
      float ss = 0.0f;
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        const int idx = t + VT * j;
        if (t < VT && idx < H) v[i][j] += __half2float(__ldcg(a.norm_delta + idx));
        ss = fmaf(v[i][j], v[i][j], ss);
      }
      norm_group_sum(ss, t / 32, t < VT, scratch);  // t < VT is warp-uniform: VT is a multiple of 32
    }
    __syncthreads();
    const float r = norm_factor(norm_total(scratch, H), H, a.norm_eps);
    __half* xh = reinterpret_cast<__half*>(xs);
#pragma unroll
    for (int i = 0; i < VI; ++i)
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        const int t = threadIdx.x + kThreads * i, idx = t + VT * j;
        if (t < VT && idx < H) xh[idx] = norm_out(w[i][j], v[i][j], r);
      }
    __syncthreads();
    if constexpr (HalfDot<F>::value) {
      for (int u = threadIdx.x; u < H / 8; u += kThreads) {
        uint32_t p[4];
        pair_x8<F>(xs[u], p);
        xs[u] = make_uint4(p[0], p[1], p[2], p[3]);
      }
      __syncthreads();
    }
  }
};

__device__ __forceinline__ float2 as_float2(float2 v) { return v; }
__device__ __forceinline__ float2 as_float2(__half2 v) { return __half22float2(v); }

// One lane's chunk c of its R rows, times all MT (<= M valid) activation rows. xs: X in shared
// memory (kSmemX) or null. Each scale group's products are summed per half of the decode pairs,
// then scaled into acc once.
//
// decode8 formats: FP32 products and sums. decode8_h formats: the CUDA-core GEMV was issue-bound
// (ncu: ~6 instructions per weight, most of them converting each decoded fp16 pair and each X
// pair to FP32 for two FP32 FMAs), so each decoded pair meets its X pair in one packed fp16 FMA
// (HFMA2), and only the group's fp16 sums (at most 16 products per half) go to FP32. The decoders
// scale their values so that no such sum can overflow for any fp16 X (NVFP4: value * 2^-6, 8
// products of at most 6 / 64 * 65504; MXFP4 and FP4-g128: * 2^-7, 16 products; INT4: (q - z) *
// 2^-8, 16 products) while products with activations down to ~2^-8 stay normal fp16 numbers. The
// price is the fp16 rounding of those short sums: relative 2^-11 per add (the GEMV tests'
// tolerance, tests/cuda/test_gemv.cpp).
template <class F, int MT, int R, bool kSmemX>
__device__ __forceinline__ void chunk_dot(const GemvArgs& a, const uint4 (&wq)[R][F::kChunkBytes / 16],
                                          const typename F::Meta (&meta)[R], int c, const float* lut,
                                          const __half* xs, float (&acc)[R][MT]) {
  constexpr bool kHalf = HalfDot<F>::value;
  constexpr int E = F::kChunkK / 8;  // 8-element steps per chunk
  constexpr int EG = (F::kGroupK < F::kChunkK ? F::kGroupK : F::kChunkK) / 8;  // steps per scale
  const __half* xc = (kSmemX ? xs : a.x) + size_t(c) * F::kChunkK;
  std::conditional_t<kHalf, __half2, float2> part[R][MT];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    if (e % EG == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if constexpr (kHalf) part[r][m] = __float2half2_rn(0.0f);
          else part[r][m] = make_float2(0.0f, 0.0f);
        }
    }
    std::conditional_t<kHalf, uint32_t, float2> d[R][4];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if constexpr (kHalf) F::decode8_h(wq[r], e, meta[r], a, d[r]);
      else F::decode8(wq[r], e, meta[r], a, lut, d[r]);
    }
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m < a.M) {
        const uint4* xp = reinterpret_cast<const uint4*>(xc + size_t(m) * a.K + 8 * e);
        const uint4 xv = kSmemX ? *xp : __ldg(xp);
        if constexpr (kHalf) {
          uint32_t xh[4] = {xv.x, xv.y, xv.z, xv.w};  // staged X is paired already
          if constexpr (!kSmemX) pair_x8<F>(xv, xh);
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int p = 0; p < 4; ++p)
              part[r][m] = __hfma2(bits_half2(d[r][p]), bits_half2(xh[p]), part[r][m]);
        } else {
          float xf[8];
          unpack_x8(xv, xf);
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int p = 0; p < 4; ++p) {
              part[r][m].x = fmaf(d[r][p].x, xf[p], part[r][m].x);
              part[r][m].y = fmaf(d[r][p].y, xf[p + 4], part[r][m].y);
            }
        }
      }
    }
    if (e % EG == EG - 1) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float s = F::scale(meta[r], e / EG, a);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const float2 f = as_float2(part[r][m]);
          acc[r][m] = fmaf(f.x + f.y, s, acc[r][m]);
        }
      }
    }
  }
}

// What the kernel multiplies into its FP32 sums at the store: the half path's decoders may scale
// differently from the tensor-core path's (INT4).
template <class F>
constexpr float out_factor() {
  if constexpr (HalfDot<F>::value) return F::kHalfFactor;
  else return F::kOutFactor;
}

// One lane's weight chunks of one loop step: U chunks (32 apart) of each of its R rows, and their
// metadata. Chunks past the row end are clamped to the last one (loaded, never used).
template <class F, int R, int U>
struct ChunkSet {
  uint4 wq[U][R][F::kChunkBytes / 16];
  typename F::Meta meta[U][R];
  __device__ __forceinline__ void load(const uint8_t* const (&qrow)[R], const uint8_t* const (&srow)[R],
                                       const GemvArgs& a, int c0, int nchunks) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = min(c0 + 32 * u, nchunks - 1);
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int v = 0; v < F::kChunkBytes / 16; ++v)
          wq[u][r][v] = load_stream(qrow[r] + size_t(c) * F::kChunkBytes + 16 * v);
        meta[u][r] = F::load_meta(srow[r], a, c);
      }
    }
  }
};

// The code and scale rows of a warp's R rows from row0; rows past N point at the last row (read,
// never stored).
template <class F, int R>
__device__ __forceinline__ void row_pointers(const GemvArgs& a, int row0, const uint8_t* (&q)[R],
                                             const uint8_t* (&s)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const size_t row = size_t(min(row0 + r, a.N - 1));
    q[r] = a.q + row * F::q_row_bytes(a.K);
    s[r] = a.scales + row * F::s_row_bytes(a.K);
  }
}

// Sums each of the warp's R x MT partials over its lanes (every lane ends with every sum).
template <int R, int MT>
__device__ __forceinline__ void warp_sum_rows(float (&acc)[R][MT]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[r][m] += __shfl_xor_sync(0xFFFFFFFFu, acc[r][m], o);
}

// Stores a warp's summed rows row0 ... in pairs (R is even, row0 too, so a silu pair's gate and up
// rows meet in one lane), different lanes storing different outputs.
template <class F, bool kRope = true, int R, int MT>
__device__ __forceinline__ void store_warp_rows(const GemvArgs& a, int row0, int lane, const float (&acc)[R][MT]) {
#pragma unroll
  for (int r = 0; r < R; r += 2)
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if (lane == (r * MT + m) % 32 && m < a.M)
        store_rows2<kRope>(a, m, row0 + r, acc[r][m], acc[r + 1][m], out_factor<F>());
}

// CTA layout: 8 warps in groups of a.k_splits (1, 2, 4 or 8); the warps of a group own the same R
// rows and take interleaved steps of 32 x U chunks along K (split-K inside the CTA: a CTA covers
// 8 R / k_splits rows, so small-N shapes still launch enough CTAs to fill every SM), then add up
// through shared memory. The next step's chunks are loaded before the current step is decoded
// (register double buffer) so every warp keeps its loads in flight while it computes. (A 4-stage
// cp.async ring per lane, three times the bytes in flight, made every one-row projection slower,
// and so did X staged times 2^7 to spare the FP4 decoders one multiply per pair:
// docs/perf/gemv-ring-combine-2026-11-27.md.)
template <class F, int MT, int R, bool kSmemX>
__device__ __forceinline__ void gemv_body(const GemvArgs& a) {
  extern __shared__ uint4 xs[];  // kSmemX: X [M, K]
  // With the double buffer one chunk per row and buffer keeps 32 bytes per row in flight per lane;
  // without it (8-16 tokens: a second buffer would not fit beside their accumulators) two chunks.
  // FP16 (8 elements a chunk, little decode work per byte) keeps two chunks per buffer too.
  constexpr bool kPrefetch = MT <= 4;
  constexpr int U = F::kChunkBytes <= 16 && (!kPrefetch || F::kChunkK == 8) ? 2 : 1;
  __shared__ float lut[F::kLutSize > 0 ? F::kLutSize : 1];
  __shared__ float red[kWarps][R * MT];
  if constexpr (F::kLutSize > 0) {
    for (int i = threadIdx.x; i < F::kLutSize; i += kThreads) lut[i] = F::lut_entry(a, i);
    __syncthreads();
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int ks = a.k_splits, slot = warp % ks;
  const int row0 = (blockIdx.x * (kWarps / ks) + warp / ks) * R;
  const int nchunks = a.K / F::kChunkK;
  const int nch = row0 < a.N ? nchunks : 0;  // a warp past N only joins the reduction
  const uint8_t* qrow[R];
  const uint8_t* srow[R];
  row_pointers<F, R>(a, row0, qrow, srow);
  float acc[R][MT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[r][m] = 0.0f;

  const int step = 32 * U * ks;
  auto dot = [&](const ChunkSet<F, R, U>& cs, int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c0 + 32 * u < nch)
        chunk_dot<F, MT, R, kSmemX>(a, cs.wq[u], cs.meta[u], c0 + 32 * u, lut, reinterpret_cast<const __half*>(xs), acc);
  };
  int c0 = lane + 32 * U * slot;
  if constexpr (kPrefetch) {
    // The weights are constant: their first chunks load while the previous kernel ends. FP16
    // requests two steps' chunks there (then one step ahead as the others): its loop does little
    // work per byte. The 4-bit formats measured slower that way on their 4096-long rows, faster
    // on the down projection's (docs/perf/gemv-prologue-2026-11-29.md).
    constexpr bool kTwoEarly = F::kChunkK == 8;
    ChunkSet<F, R, U> cur, nxt;
    if (c0 < nch) cur.load(qrow, srow, a, c0, nchunks);
    if (kTwoEarly && c0 + step < nch) nxt.load(qrow, srow, a, c0 + step, nchunks);
    pdl_wait();
    pdl_trigger();
    if constexpr (kSmemX) stage_x_paired<F>(a, xs);
    for (bool ahead = kTwoEarly; c0 < nch; c0 += step, ahead = false) {
      if (!ahead && c0 + step < nch) nxt.load(qrow, srow, a, c0 + step, nchunks);
      dot(cur, c0);
      cur = nxt;
    }
  } else {
    static_assert(!kSmemX, "X is staged only for one-row launches, which prefetch");
    pdl_wait();
    pdl_trigger();
    for (; c0 < nch; c0 += step) {
      ChunkSet<F, R, U> cur;
      cur.load(qrow, srow, a, c0, nchunks);
      dot(cur, c0);
    }
  }

  // Each shuffle sum is stored as it completes (summing all first measured the down projection at
  // one row 1.5% slower, H200 2026-11-28).
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[r][m] += __shfl_xor_sync(0xFFFFFFFFu, acc[r][m], o);
      if (ks > 1 && lane == (r * MT + m) % 32) red[warp][r * MT + m] = acc[r][m];
    }
  if (ks == 1) return store_warp_rows<F>(a, row0, lane, acc);  // uniform over the CTA
  __syncthreads();
  if (slot != 0) return;
  for (int j = lane; j < R / 2 * MT; j += 32) {
    const int r = 2 * (j / MT), m = j % MT;
    float v0 = 0.0f, v1 = 0.0f;
    for (int s = 0; s < ks; ++s) v0 += red[warp + s][r * MT + m], v1 += red[warp + s][(r + 1) * MT + m];
    if (m < a.M) store_rows2(a, m, row0 + r, v0, v1, out_factor<F>());
  }
}

// The one-row, staged-X, one-split GEMV with persistent warps, for shapes whose grid would not be
// resident at once (the gate/up projection: 1792 CTAs of 16 rows against 528 resident on an H100).
// The grid is what is resident; each CTA stages X once and each warp walks row groups g,
// g + gridDim.x * kWarps, ..., its loads one step ahead across group boundaries (the next group's
// first chunks are requested during the current group's last step), so a warp pays the first
// loads' latency, the prologue and X's staging once instead of once per 2 rows. For the fp16-pair
// decoders (HalfDot), which use no table.
//
// kNorm: X is linear_rmsnorm's (NormedX), computed by each CTA instead of staged from a.x.
template <class F, int R, bool kNorm>
__global__ void __launch_bounds__(kThreads, R == 2 ? 4 : 2) gemv_persistent_kernel(const GemvArgs a) {
  static_assert(HalfDot<F>::value && F::kLutSize == 0 && R % 2 == 0);
  extern __shared__ uint4 xs[];
  __shared__ float norm_scratch[kNorm ? 32 : 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nchunks = a.K / F::kChunkK, steps = (nchunks + 31) / 32;
  const int groups = (a.N + R - 1) / R, stride = gridDim.x * kWarps;
  int g = blockIdx.x * kWarps + warp;
  const uint8_t* q[R];
  const uint8_t* s[R];
  ChunkSet<F, R, 1> cur, nxt;
  if (g < groups) row_pointers<F>(a, g * R, q, s), cur.load(q, s, a, lane, nchunks);
  [[maybe_unused]] NormedX nx;
  if constexpr (kNorm) nx.load_res_w(a);
  pdl_wait();
  pdl_trigger();
  if constexpr (kNorm) nx.stage<F>(a, xs, norm_scratch);
  else stage_x_paired<F>(a, xs);
  for (; g < groups; g += stride) {
    const bool more = g + stride < groups;
    const uint8_t* qn[R];
    const uint8_t* sn[R];
    if (more) row_pointers<F>(a, (g + stride) * R, qn, sn);
    float acc[R][1];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r][0] = 0.0f;
    for (int st = 0; st < steps; ++st) {
      const int c = lane + 32 * st;
      if (st + 1 < steps) nxt.load(q, s, a, c + 32, nchunks);
      else if (more) nxt.load(qn, sn, a, lane, nchunks);
      if (c < nchunks) chunk_dot<F, 1, R, true>(a, cur.wq[0], cur.meta[0], c, nullptr, reinterpret_cast<const __half*>(xs), acc);
      cur = nxt;
    }
    warp_sum_rows(acc);
    store_warp_rows<F, !kNorm>(a, g * R, lane, acc);  // linear_rmsnorm takes no RoPE stack
    if (more)
#pragma unroll
      for (int r = 0; r < R; ++r) q[r] = qn[r], s[r] = sn[r];
  }
}

template <class F, int MT, int R, bool kSmemX = false>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const GemvArgs a) {
  gemv_body<F, MT, R, kSmemX>(a);
}
// The one- and two-token, two-row instantiations of the fp16-sum path: left to itself ptxas gave
// them fewer than 64 registers and a few bytes of spills (fp4-g128 M = 1: 48 registers, 16 bytes;
// nvfp4 M = 2: 64, 12 bytes); a budget of 4 CTAs per SM (64 registers) compiles them without.
template <class F, int MT, int R, bool kSmemX = false>
__global__ void __launch_bounds__(kThreads, 4) gemv_kernel_4ctas(const GemvArgs a) {
  gemv_body<F, MT, R, kSmemX>(a);
}
template <class F, int MT, int R, bool kSmemX = false>
constexpr auto gemv_entry() {
  if constexpr (HalfDot<F>::value && R == 2 && MT <= 2) return gemv_kernel_4ctas<F, MT, R, kSmemX>;
  else return gemv_kernel<F, MT, R, kSmemX>;
}

// CTAs of the persistent kernel resident at once on this GPU (with the largest X asked for).
template <class F, int R, bool kNorm>
int64_t persistent_gemv_resident() {
  static const int64_t resident = [] {
    int per_sm = 0;
    NIBBLE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_persistent_kernel<F, R, kNorm>,
                                                                    kThreads, kSmemXMaxBytes));
    return int64_t(per_sm) * tc::sm_count();
  }();
  return resident;
}

// Policies that set kNormFused (from norm_fused_kind, gemv_args.h) run their persistent kernel with
// 4 rows per warp and can compute linear_rmsnorm's norm in it (NormedX). On the H200 (8-layer
// Llama-3.1-8B shape, batch 1, two passes a setting, two calls): mxfp4 1245 / 1242 -> 1274 / 1277
// and 1268 / 1271 -> 1273 / 1279 tokens/s, int4-g128 1273 / 1271 -> 1303 / 1302 and 1266 / 1263 ->
// 1308 / 1308. fp4-g128 was level and nvfp4 2% slower that way, and the norm inside the 2-row
// kernel (4 CTAs per SM, each normalizing X) cost what the norm kernel saved, so the others keep 2
// rows and the norm kernel (docs/perf/fused-norm-2026-11-29.md).
template <class F, class = void>
struct NormFused : std::false_type {};
template <class F>
struct NormFused<F, std::void_t<decltype(F::kNormFused)>> : std::bool_constant<F::kNormFused> {};

// Launches the persistent kernel for one row and one split with X staged, where the normal grid
// (ctas of 2 rows per warp) exceeds what is resident, or always with a.norm_res (the grid then
// at most what is resident); returns whether it did. Rows per warp: 4 where F sets kNormFused,
// else 2; NIBBLE_GEMV_PERSISTENT_ROWS (2 or 4) overrides both.
template <class F>
bool launch_persistent_gemv(const GemvArgs& a, unsigned ctas, cudaStream_t s) {
  const bool norm = a.norm_res != nullptr;
  if (norm ? !NormFused<F>::value || !gemv_norm_fusable(a.M, a.K, a.k_splits)
           : !persistent_gemv_enabled() || !smem_x_fits(a.M, a.K) || a.k_splits != 1)
    return false;
  auto go = [&](auto kernel, int64_t resident) {
    if (resident <= 0 || (!norm && int64_t(ctas) <= resident)) return false;
    launch_pdl(kernel, dim3(unsigned(std::min<int64_t>(ctas, resident))), kThreads, size_t(a.K) * 2, s, a);
    return true;
  };
  const int rows = persistent_gemv_rows_override() ? persistent_gemv_rows_override() : NormFused<F>::value ? 4 : 2;
  if constexpr (NormFused<F>::value) {
    if (norm)
      return rows == 4 ? go(gemv_persistent_kernel<F, 4, true>, persistent_gemv_resident<F, 4, true>())
                       : go(gemv_persistent_kernel<F, 2, true>, persistent_gemv_resident<F, 2, true>());
  }
  return rows == 4 ? go(gemv_persistent_kernel<F, 4, false>, persistent_gemv_resident<F, 4, false>())
                   : go(gemv_persistent_kernel<F, 2, false>, persistent_gemv_resident<F, 2, false>());
}

// Launches the instantiation for MT = the smallest of {1, 2, 4, 8, 16} >= M and R rows per warp
// (R = 4 only up to M = 8); a.k_splits warps share each row group. kPersistent: the fp16-pair
// formats' one-row GEMV takes the persistent kernel where its grid is not resident at once.
// Decode at batch 1, H100, Llama-3.1-8B shape, same binary with it off and on: int4-g128 374.8 ->
// 401.2 tokens/s, mxfp4 391.8 -> 399.0, nvfp4 393.6 -> 398.8, fp4-g128 408.4 -> 410.7; the RaZeR
// formats measured level or slower (razer-fp4-g128 356.0 -> 352.9) and keep the plain grid
// (docs/perf/gemv-persistent-2026-11-28.md).
template <class F, bool kPersistent = true>
void launch_gemv(const GemvArgs& a, int rows_per_warp, cudaStream_t s) {
  const int R = rows_per_warp == 4 && a.M <= 8 ? 4 : 2;  // 4 rows x 16 tokens would spill
  const int rows_per_cta = kWarps / a.k_splits * R;
  const dim3 grid((a.N + rows_per_cta - 1) / rows_per_cta);
  auto go = [&](auto kernel, size_t smem = 0) { launch_pdl(kernel, grid, kThreads, smem, s, a); };
  const size_t xbytes = size_t(a.K) * 2;
  if constexpr (kPersistent && HalfDot<F>::value)
    if ((R == 2 || a.norm_res) && launch_persistent_gemv<F>(a, grid.x, s)) return;
  if (a.norm_res) throw Error("GEMV: the norm is not fusable here (gemv_norm_fusable)");
  if (smem_x_fits(a.M, a.K)) {
    R == 4 ? go(gemv_entry<F, 1, 4, true>(), xbytes) : go(gemv_entry<F, 1, 2, true>(), xbytes);
  } else if (R == 4) {
    if (a.M <= 1) go(gemv_entry<F, 1, 4>());
    else if (a.M <= 2) go(gemv_entry<F, 2, 4>());
    else if (a.M <= 4) go(gemv_entry<F, 4, 4>());
    else go(gemv_entry<F, 8, 4>());
  } else {
    if (a.M <= 1) go(gemv_entry<F, 1, 2>());
    else if (a.M <= 2) go(gemv_entry<F, 2, 2>());
    else if (a.M <= 4) go(gemv_entry<F, 4, 2>());
    else if (a.M <= 8) go(gemv_entry<F, 8, 2>());
    else go(gemv_entry<F, 16, 2>());
  }
}

// An FP4 (E2M1) policy B decoded through the FP8 pair conversion instead (fp4x8_e4m3_h: value *
// 2^-6, X halved so the products are value * X * 2^-7 whatever B's own scaling): 11 operations per
// code word where bit placement takes 19. It pays at one row where X is read from global memory
// (rows too long to stage X: the down projections; fp4-g128 14.3 -> 13.2 us at Llama-3.1-8B's
// shape); with X in shared memory it measured 5-8% slower (docs/perf/gemv-staged-pairs-2026-11-27.md).
// Compute capability 8.9+ (launch_fp4_gemv checks). Not for RaZeR (its -0 codes are special).
template <class B>
struct E4M3Decoded : B {
  static constexpr bool kEvenOddPairs = true;
  static constexpr float kHalfFactor = 128.0f;
  static __device__ __forceinline__ void decode8_h(const uint4 (&w)[1], int e, const typename B::Meta&,
                                                   const GemvArgs&, uint32_t (&h)[4]) {
    fp4x8_e4m3_h(word_of(w, e), h);
  }
};
// launch_gemv<F>, with E4M3Decoded<F> at one row where X is not staged.
template <class F>
void launch_fp4_gemv(const GemvArgs& a, int rows_per_warp, cudaStream_t s) {
  if (a.M == 1 && !smem_x_fits(a.M, a.K) && tc::compute_capability() >= 89)
    launch_gemv<E4M3Decoded<F>, false>(a, rows_per_warp, s);  // X not staged: never persistent
  else launch_gemv<F>(a, rows_per_warp, s);
}

// RaZeR formats on CUDA cores: the byte-table decoder (Table) where both special values fit an
// fp16 high byte, else bit placement with the select (Bits).
template <class Table, class Bits>
void launch_razer_gemv(const GemvArgs& a, int rows_per_warp, cudaStream_t s) {
  if (razer_sv_fits_hi_byte(a)) launch_gemv<Table, false>(a, rows_per_warp, s);
  else launch_gemv<Bits, false>(a, rows_per_warp, s);
}

}  // namespace nibble::cuda::detail

// Split-K decode attention on tensor cores (sm_80+). Per 64-key tile of the chunk each of the
// four warps takes 16 keys and works on the transposed products, keys and head dims as the mma's
// 16 rows, the CTA's a.hpc (<= 8) query heads as its 8 columns (columns past a.hpc are zero):
// S^T = K.Q^T (D / 16 mma steps, K the A operand by ldmatrix from shared memory, Q^T the B operand
// in registers), the running max and sum per head (online softmax in registers), then
// (P.V)^T += V^T.P^T (D / 16 row tiles, V^T by transposing ldmatrix; P^T's B fragments from S^T's
// C fragments by an in-register 8x8 transpose, movmatrix; P split into an fp16 high and low part,
// so the probabilities keep ~22 bits as in the FP32 kernel). The warps merge their partials once,
// at the chunk's end. Against heads as the 16 rows (of which Llama's group of 4 filled 4) this
// issues half the mma and keeps half the accumulators: 124-138 registers a thread where that took
// 166-222, and end to end (8-layer Llama-3.1-8B shape, int4-g128, same call, two passes) batch 1
// +1.8%, batch 4 +2.0%, batch 16 +0.6%, batch 64 +0.3% (docs/perf/attn-transposed-2026-12-01.md).
// Against the CUDA-core kernel (one 16-lane dot product and shuffle reduction per key and head,
// three CTA barriers per tile) it issues a fraction of the instructions per key, which is what
// limited that kernel at 16 and 64 sequences (ncu at batch 16: 37% issue-busy at 21% occupancy,
// DRAM 40%).
// Tiles arrive by cp.async, several in flight. FP16 rows are stored with their 16-byte units
// XOR-swizzled by row (unit u of row r at u ^ (r % 8)) so that the eight rows an ldmatrix reads hit
// distinct banks. E4M3 rows arrive as codes with their row scales; each warp converts its 16 rows
// to FP16 (exact) into a swizzled buffer of its own, and the scales multiply the scores (K) and
// the probabilities (V) in FP32.
// Cluster combine (sm_90, kCluster): where a sequence has at most two chunks (batch 16 at ~530 keys:
// 2, batch 64: 1), its chunk CTAs of one head block run as one thread-block cluster; each keeps its
// chunk's partial in its own shared memory and, after a cluster barrier, the CTAs combine them
// through distributed shared memory (each a share of the outputs), so the partials never go
// through the workspace and no CTA counts itself in with an atomic. Batch 16 +1.3% for int4-g128
// and nvfp4 (8-layer Llama-3.1-8B shape, same call); clusters of 8 chunks measured level at batch 1
// and 3.5% slower at batch 4 (docs/perf/attn-cluster-2026-11-29.md), so more chunks keep the
// workspace.
#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>

#include "gemm_launch.cuh"
#include "half_bits.cuh"
#include "mma.cuh"
#include "ops_attention_decode.cuh"

namespace nibble::cuda::ops::attn {
using cuda::detail::h2bits_to_float2;
using cuda::detail::half2_bits;
using cuda::detail::ldmatrix_x4;
using cuda::detail::ldmatrix_x4_trans;
using cuda::detail::mma_16816;
using cuda::detail::movmatrix_trans;
using tc::cp_async16;
using tc::cp_async_commit;
using tc::cp_async_wait;

namespace {

constexpr int kTcKeys = 64;  // keys per tile: 16 per warp
constexpr int kMaxClusterChunks = 2;  // chunks of a combining cluster (see the top)
// Tiles in flight per CTA: 3 against 2 (H200, Llama-3.1-8B shape, 8 layers, fp4-g128, two runs
// each): batch 64 28082 / 28096 -> 28493 / 28590 tok/s, batches 1 and 16 level.
constexpr int kTcStages = 3;
// E4M3 caches: 2, so that three CTAs fit an SM beside each warp's FP16 copy of its rows (65 KB at
// D = 128; 3 stages would take 81.5 KB, two CTAs). Not measured against 3.
constexpr int kTcStagesE4m3 = 2;

// Shared memory of a CTA: S stages of a tile of K and one of V as the cache stores them (FP16: with
// their 16-byte units swizzled, read by ldmatrix; E4M3: plain code rows), then for E4M3 the rows'
// scales [S][K, V][keys] and each warp's own FP16 copy of its 16 rows of K and V (swizzled). The
// warps' merge at the end reuses all of it.
template <class Kv, int D, int S>
struct TcSmem {
  // The merge's floats: each warp's P.V (rows of kSoStride) and (max, sum) per head, then
  // (kCluster) the chunk's partial [16][D] and its (max, sum) [16].
  static constexpr int kSoStride = D + 4;
  static constexpr size_t kMergeFloats = size_t(kWarps) * 8 * (kSoStride + 2) + 16 * (D + 2);
  static constexpr int kRowBytes = D * Kv::kElemBytes;
  static constexpr int kCopies = kRowBytes / 16;  // 16-byte copies per row
  static constexpr int kTileBytes = kTcKeys * kRowBytes;
  static constexpr size_t kStages = size_t(S) * 2 * kTileBytes;
  static constexpr size_t kScales = Kv::kScaled ? size_t(S) * 2 * kTcKeys * 4 : 0;
  static constexpr size_t kConv = Kv::kScaled ? size_t(kWarps) * 2 * 16 * D * 2 : 0;
  static constexpr size_t bytes() { return kStages + kScales + kConv; }
  static_assert(bytes() >= kMergeFloats * 4, "the merge reuses the tiles");
};

__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) { return half2_bits(__floats2half2_rn(lo, hi)); }
// x - float(fp16(x)) for both halves of a packed pair (the low part of a two-term split).
__device__ __forceinline__ uint32_t pack_h2_rest(float lo, float hi, uint32_t packed) {
  const float2 f = h2bits_to_float2(packed);
  return pack_h2(lo - f.x, hi - f.y);
}

// kCluster: after every CTA of the cluster (the grid's x: one per chunk, rank = chunk) put its
// chunk's partial (part: [16][D] P.V, then (max, sum) [16]) in its shared memory, the CTAs combine
// them into the output, output i of the head block in CTA i / kThreads % nc (nc: the sequence's
// chunks), in chunk order. The second barrier keeps every CTA's shared memory alive until all have
// read it. CTAs past the sequence's last chunk only join the barriers.
template <int D>
__device__ __forceinline__ void cluster_combine(const DecodeArgs& a, int b, int h0, int p, int chunk, float* part) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int nc = p / chunk + 1;
  for (int i = blockIdx.x * kThreads + threadIdx.x; int(blockIdx.x) < nc && i < a.hpc * D; i += nc * kThreads) {
    const int h = i / D;
    float2 ml[kMaxClusterChunks];
    float o[kMaxClusterChunks], mx = -INFINITY;
#pragma unroll
    for (int c = 0; c < kMaxClusterChunks; ++c)
      if (c < nc) {
        const float* rp = cluster.map_shared_rank(part, c);
        ml[c] = reinterpret_cast<const float2*>(rp + 16 * D)[h], o[c] = rp[i];
        mx = fmaxf(mx, ml[c].x);  // finite: every chunk has a key
      }
    float acc = 0.0f, l = 0.0f;
#pragma unroll
    for (int c = 0; c < kMaxClusterChunks; ++c)
      if (c < nc) {
        const float f = exp2f(ml[c].x - mx);
        acc += f * o[c], l += f * ml[c].y;
      }
    a.out[(int64_t(b) * a.nh + h0 + h) * D + i % D] = f2h(acc / l);
  }
  cluster.sync();
#endif
}

template <class Kv, int D, int S, bool kCluster>
__global__ void __launch_bounds__(kThreads) attention_decode_tc_kernel(const DecodeArgs a) {
  using L = TcSmem<Kv, D, S>;
  constexpr int kCpr = D * 2 / 16;        // 16-byte units per key row in FP16 (8 or 16)
  constexpr int kUnits = kTcKeys * kCpr;  // per FP16 tile of K (or V)
  extern __shared__ __align__(16) uint8_t smem[];
  const int b = blockIdx.z, heads_blocks = a.group / a.hpc;
  const int g = blockIdx.y / heads_blocks, h0 = g * a.group + (blockIdx.y % heads_blocks) * a.hpc;
  const int p = a.pos[b], s = a.slot[b];
  if (!decode_pos_ok(a, p, s)) {  // the host could not check it: make the rows visibly wrong
    pdl_wait();
    if (blockIdx.x == 0)
      for (int i = threadIdx.x; i < a.hpc * D; i += kThreads) a.out[(int64_t(b) * a.nh + h0) * D + i] = 0x7E00;
    return;
  }
  const int chunk = seq_chunk(a, p, kTcKeys), c0 = blockIdx.x * chunk;  // p checked: no overflow
  if (c0 > p) {
    if constexpr (kCluster) cluster_combine<D>(a, b, h0, p, chunk, nullptr);  // the barriers only: no output of its own
    return;
  }
  const int n = min(chunk, p + 1 - c0), tiles = (n + kTcKeys - 1) / kTcKeys;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gr = lane >> 2, tq = lane & 3;
  const KvHead kv = kv_head<Kv>(a.cache, D, (int64_t(s) * a.nkv + g) * a.max_ctx + c0);
  auto unit_at = [](int row, int u) { return row * kCpr + (u ^ (row & 7)); };
  auto stage = [&](int t) { return smem + (t % S) * 2 * L::kTileBytes; };  // [K, V] tiles
  float* scales = reinterpret_cast<float*>(smem + L::kStages);            // E4M3: [S][K, V][keys]
  uint4* conv = reinterpret_cast<uint4*>(smem + L::kStages + L::kScales) + warp * 2 * 16 * kCpr;
  // Where copy c (0 .. L::kCopies - 1) of row r of a tile lands in its stage.
  auto copy_at = [&](int r, int c) { return Kv::kScaled ? r * L::kRowBytes + 16 * c : 16 * unit_at(r, c); };

  // Tile t's K and V rows (and E4M3 scales) into stage t % S as one cp.async group; rows past the
  // chunk are zero-filled. skip: the new token's row when requested before the wait (written below).
  auto load_tile = [&](int t, int skip) {
    if (t < tiles) {
#pragma unroll 4
      for (int i = threadIdx.x; i < 2 * kTcKeys * L::kCopies; i += kThreads) {
        const int which = i / (kTcKeys * L::kCopies), u = i % (kTcKeys * L::kCopies);
        const int r = u / L::kCopies, c = u % L::kCopies, row = t * kTcKeys + r;
        const uint8_t* src = (which ? kv.v : kv.k) + int64_t(min(row, n - 1)) * L::kRowBytes + 16 * c;
        if (row != skip) cp_async16(stage(t) + which * L::kTileBytes + copy_at(r, c), src, row < n);
      }
      if constexpr (Kv::kScaled) {
        for (int i = threadIdx.x; i < 2 * kTcKeys; i += kThreads) {
          const int which = i / kTcKeys, r = i % kTcKeys, row = t * kTcKeys + r;
          if (row != skip)
            tc::cp_async4(scales + ((t % S) * 2 + which) * kTcKeys + r, (which ? kv.vs : kv.ks) + min(row, n - 1),
                          row < n);
        }
      }
    }
    cp_async_commit();  // an empty group past the last tile keeps the wait count uniform
  };
  // As in the CUDA-core kernel: with prewait the first S tiles load while the kernel before (the
  // new token's KV store) still runs, and the new row pr is read after the wait.
  const int pr = a.prewait && p - c0 < n ? p - c0 : -1;
  if (a.prewait)
#pragma unroll
    for (int t = 0; t < S; ++t) load_tile(t, pr);
  pdl_wait();
  pdl_trigger();
  if (!a.prewait)
#pragma unroll
    for (int t = 0; t < S; ++t) load_tile(t, -1);
  uint4 fresh = {};
  float fresh_sc = 0.0f;
  if (pr >= 0 && pr < S * kTcKeys) {
    if (threadIdx.x < 2 * L::kCopies)
      fresh = __ldcg(reinterpret_cast<const uint4*>((threadIdx.x < L::kCopies ? kv.k : kv.v) +
                                                    int64_t(pr) * L::kRowBytes + (threadIdx.x % L::kCopies) * 16));
    if constexpr (Kv::kScaled)
      if (threadIdx.x >= 64 && threadIdx.x < 66) fresh_sc = __ldcg((threadIdx.x == 64 ? kv.ks : kv.vs) + pr);
  }

  // Q^T as B fragments (k = head dim, n = head h0 + gr), zero past a.hpc; scaled in FP32 later.
  uint32_t qb[D / 16][2];
  {
    const unsigned* q = reinterpret_cast<const unsigned*>(a.q + (int64_t(b) * a.nh + h0 + gr) * D);
    const bool head_ok = gr < a.hpc;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const int k2 = 8 * ks + tq;  // pairs of the head dim
      qb[ks][0] = head_ok ? __ldcg(q + k2) : 0u, qb[ks][1] = head_ok ? __ldcg(q + k2 + 4) : 0u;
    }
  }

  // This warp's running state for heads 2 tq and 2 tq + 1 (the columns of S^T): max (base 2),
  // this lane's part of the sum (its keys gr and gr + 8 of each tile), and (P.V)^T as C fragments
  // (row tile j: d = 16 j + gr, + 8; columns the two heads).
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[D / 16][4] = {};
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<S - 1>();
    if (t < S && pr >= 0 && pr / kTcKeys == t) {
      const int r = pr % kTcKeys;
      if (threadIdx.x < 2 * L::kCopies)
        *reinterpret_cast<uint4*>(stage(t) + (threadIdx.x / L::kCopies) * L::kTileBytes +
                                  copy_at(r, threadIdx.x % L::kCopies)) = fresh;
      if constexpr (Kv::kScaled)
        if (threadIdx.x >= 64 && threadIdx.x < 66) scales[((t % S) * 2 + threadIdx.x - 64) * kTcKeys + r] = fresh_sc;
    }
    __syncthreads();
    const int key0 = t * kTcKeys + 16 * warp;  // this warp's first key in the chunk
    if (key0 < n) {
      // The warp's 16 rows of K and V as FP16 units, swizzled: in the stage (FP16), or converted
      // from the codes into the warp's own buffer (E4M3 values are exact in FP16; the row scales
      // multiply the scores and the probabilities in FP32).
      const uint4* ks_;
      const uint4* vs_;
      int rb;  // the warp's first row there
      if constexpr (Kv::kScaled) {
        const uint8_t* raw = stage(t) + 16 * warp * L::kRowBytes;
        for (int i = lane; i < 16 * (D / 8); i += 32) {
          const int r = i / (D / 8), w = i % (D / 8);
          const uint8_t* src = raw + r * L::kRowBytes + 8 * w;
          conv[unit_at(r, w)] = Kv::half8(*reinterpret_cast<const uint2*>(src));
          conv[16 * kCpr + unit_at(r, w)] = Kv::half8(*reinterpret_cast<const uint2*>(src + L::kTileBytes));
        }
        __syncwarp();
        ks_ = conv, vs_ = conv + 16 * kCpr, rb = 0;
      } else {
        ks_ = reinterpret_cast<const uint4*>(stage(t)), vs_ = ks_ + kUnits, rb = 16 * warp;
      }
      const float* kscale = scales + (t % S) * 2 * kTcKeys + 16 * warp;  // E4M3 only
      const float* vscale = kscale + kTcKeys;
      // S^T for the warp's 16 keys (rows) and 8 heads (columns): sc[e] is key key0 + gr + 8 (e / 2),
      // head 2 tq + e % 2. K is the A operand (ldmatrix: matrices keys 0-7 | 8-15 x d 16 kk + 0-7 |
      // 8-15), Q^T the B one; even and odd steps in two accumulators (shorter mma chains).
      float sc[4] = {}, sc_odd[4] = {};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t ka[4];
        const int r = rb + ((lane >> 3) & 1) * 8 + (lane & 7);
        ldmatrix_x4(ka, ks_ + unit_at(r, 2 * kk + (lane >> 4)));
        mma_16816(kk % 2 ? sc_odd : sc, ka, qb[kk][0], qb[kk][1]);
      }
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = gr + 8 * (e >> 1), key = key0 + r;
        sc[e] += sc_odd[e];
        if constexpr (Kv::kScaled) sc[e] *= kscale[r];
        sc[e] = key < n ? sc[e] * a.qscale : -INFINITY;
        mx[e & 1] = fmaxf(mx[e & 1], sc[e]);
      }
      float alpha[2], base[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int s = 4; s < 32; s *= 2) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], s));  // over gr
        const float m_new = fmaxf(m[i], mx[i]);
        base[i] = m_new == -INFINITY ? 0.0f : m_new;  // a head without keys yet keeps p = 0
        alpha[i] = exp2f(m[i] - base[i]);
        m[i] = m_new;
        l[i] *= alpha[i];
      }
#pragma unroll
      for (int j = 0; j < D / 16; ++j) o[j][0] *= alpha[0], o[j][1] *= alpha[1], o[j][2] *= alpha[0], o[j][3] *= alpha[1];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[e] = exp2f(sc[e] - base[e & 1]);
        l[e & 1] += sc[e];
        if constexpr (Kv::kScaled) sc[e] *= vscale[gr + 8 * (e >> 1)];  // P times the V row scale
      }
      // P^T as B fragments over the 16 keys (k), high and low fp16 parts: S^T's C fragments hold
      // (key gr, heads 2 tq + 0-1), B wants (keys 2 tq + 0-1, head gr): each 8x8 half transposed
      // in registers.
      uint32_t ph[2], pl[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint32_t hi = pack_h2(sc[2 * i], sc[2 * i + 1]);
        ph[i] = movmatrix_trans(hi), pl[i] = movmatrix_trans(pack_h2_rest(sc[2 * i], sc[2 * i + 1], hi));
      }
      // (P.V)^T += V^T P^T: V^T is the A operand (ldmatrix.trans: matrices d 16 j + 0-7 | 8-15 x keys
      // 0-7 | 8-15).
#pragma unroll
      for (int j = 0; j < D / 16; ++j) {
        uint32_t va[4];
        const int r = rb + (lane >> 4) * 8 + (lane & 7);
        ldmatrix_x4_trans(va, vs_ + unit_at(r, 2 * j + ((lane >> 3) & 1)));
        mma_16816(o[j], va, ph[0], ph[1]);
        mma_16816(o[j], va, pl[0], pl[1]);
      }
    }
    __syncthreads();  // stage t % S is free again
    load_tile(t + S, -1);
  }
  cp_async_wait<0>();

  // The four warps' partials through shared memory (all of it free now): per warp and head its max,
  // sum and P.V (rows kSoStride apart: the C fragments' stores hit distinct banks), then per (head,
  // column) the merge, written as the chunk's partial.
  constexpr int kSoStride = L::kSoStride;
  float* s_o = reinterpret_cast<float*>(smem);       // [kWarps][8][kSoStride]
  float* s_ml = s_o + kWarps * 8 * kSoStride;        // [kWarps][8][2]
  float* part = s_ml + kWarps * 8 * 2;               // kCluster: [16][D], then (max, sum) [16]
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int s = 4; s < 32; s *= 2) l[i] += __shfl_xor_sync(0xffffffffu, l[i], s);
  float* so = s_o + warp * 8 * kSoStride;
#pragma unroll
  for (int j = 0; j < D / 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) so[(2 * tq + (e & 1)) * kSoStride + 16 * j + gr + 8 * (e >> 1)] = o[j][e];
  if (gr == 0)
#pragma unroll
    for (int i = 0; i < 2; ++i) s_ml[(warp * 8 + 2 * tq + i) * 2] = m[i], s_ml[(warp * 8 + 2 * tq + i) * 2 + 1] = l[i];
  __syncthreads();
  for (int i = threadIdx.x; i < a.hpc * D; i += kThreads) {
    const int h = i / D, e = i % D;
    float mw[kWarps], mm = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mw[w] = s_ml[(w * 8 + h) * 2], mm = fmaxf(mm, mw[w]);  // finite: n >= 1
    float acc = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(mw[w] - mm);  // 0 for a warp that saw no key
      acc += f * s_o[(w * 8 + h) * kSoStride + e];
      sum += f * s_ml[(w * 8 + h) * 2 + 1];
    }
    if constexpr (kCluster) {
      part[i] = acc;
      if (e == 0) reinterpret_cast<float2*>(part + 16 * D)[h] = make_float2(mm, sum);
    } else {
      ws_acc(a, b, h0 + h, blockIdx.x, D)[e] = acc;
      if (e == 0) ws_ml(a, b, h0 + h, D)[blockIdx.x] = make_float2(mm, sum);
    }
  }
  if constexpr (kCluster) cluster_combine<D>(a, b, h0, p, chunk, part);
  else combine_if_last<D, 16>(a, b, h0, p, chunk);
}

// Opts the kernel's shared memory in (once per instantiation).
template <class Kv, int D, int S, bool kCluster>
void tc_opt_in() {
  static const bool done = [] {
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(attention_decode_tc_kernel<Kv, D, S, kCluster>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(TcSmem<Kv, D, S>::bytes())));
    return true;
  }();
  (void)done;
}

// CTAs of the kernel resident at once on this GPU (the same for both variants).
template <class Kv, int D, int S>
int64_t tc_resident() {
  static const int64_t n = [] {
    tc_opt_in<Kv, D, S, false>();
    int per_sm = 0;
    NIBBLE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, attention_decode_tc_kernel<Kv, D, S, false>,
                                                                    kThreads, TcSmem<Kv, D, S>::bytes()));
    return int64_t(per_sm) * tc::sm_count();
  }();
  return n;
}

// f(Kv{}, D constant, S constant) for the cache's element type and head dim d (64 or 128).
template <class F>
auto with_tc_kernel(const KvCache& cache, int d, F&& f) {
  return with_kv(cache, [&](auto kv) {
    using Kv = decltype(kv);
    constexpr int S = Kv::kScaled ? kTcStagesE4m3 : kTcStages;
    return d == 64 ? f(kv, std::integral_constant<int, 64>{}, std::integral_constant<int, S>{})
                   : f(kv, std::integral_constant<int, 128>{}, std::integral_constant<int, S>{});
  });
}

}  // namespace

int tc_heads_per_cta(int group) {
  for (int h = std::min(group, 8); h > 1; --h)
    if (group % h == 0) return h;
  return 1;
}

// Waves of the grid (at the hint's context) times a CTA's keys plus a fixed cost of kFixedKeys
// keys' time (its latency chain: the first tiles' DRAM round trip, the merge, the combine), least
// wins; ties go to the longer chunk (fewer partials to combine). With the cluster combine (at most
// kMaxClusterChunks chunks) the fixed cost is kClusterFixedKeys: no partial goes through global
// memory and no atomic orders the CTAs; it is taken where it costs no more.
TcPlan tc_plan(int64_t ctas_per_chunk, int max_pos_hint, int slots, const KvCache& cache, int d) {
  constexpr int kFixedKeys = 128, kClusterFixedKeys = 64, kMaxKeys = 1024;
  const int64_t resident = with_tc_kernel(cache, d, [](auto kv, auto D, auto S) {
    return tc_resident<decltype(kv), decltype(D)::value, decltype(S)::value>();
  });
  const bool cluster_ok = attention_cluster_enabled() && tc::compute_capability() >= 90;
  TcPlan best{kMaxKeys, false}, best_cl{0, true};
  int64_t best_cost = -1, best_cl_cost = -1;
  for (int c = kTcKeys; c <= kMaxKeys; c += kTcKeys) {
    const int64_t chunks = (max_pos_hint + c) / c;
    if (chunks > slots) continue;
    const int64_t waves = (ctas_per_chunk * chunks + resident - 1) / resident;
    const int64_t cost = waves * (c + kFixedKeys), cl_cost = waves * (c + kClusterFixedKeys);
    if (best_cost < 0 || cost <= best_cost) best.chunk = c, best_cost = cost;
    if (cluster_ok && chunks <= kMaxClusterChunks && (best_cl_cost < 0 || cl_cost <= best_cl_cost))
      best_cl.chunk = c, best_cl_cost = cl_cost;
    if (chunks == 1) break;  // longer chunks change nothing
  }
  return best_cl_cost >= 0 && best_cl_cost <= best_cost ? best_cl : best;
}

void launch_decode_tc(DecodeArgs a, dim3 grid, int d, bool cluster, cudaStream_t stream) {
  with_tc_kernel(a.cache, d, [&](auto kv, auto D, auto S) {
    using Kv = decltype(kv);
    constexpr int kD = decltype(D)::value, kS = decltype(S)::value;
    constexpr size_t kSmem = TcSmem<Kv, kD, kS>::bytes();
    a.prewait = int64_t(grid.x) * grid.y * grid.z <= tc_resident<Kv, kD, kS>();
    if (cluster) {
      if (grid.x > unsigned(kMaxClusterChunks)) throw Error("attention_decode: a cluster of more chunks than it combines");
      tc_opt_in<Kv, kD, kS, true>();
      launch_pdl_cluster(grid.x, attention_decode_tc_kernel<Kv, kD, kS, true>, grid, kThreads, kSmem, stream, a);
    } else {
      launch_pdl(attention_decode_tc_kernel<Kv, kD, kS, false>, grid, kThreads, kSmem, stream, a);
    }
  });
}

}  // namespace nibble::cuda::ops::attn

// Split-K decode attention (flash-decoding, ops_attention_decode.cuh) on CUDA cores, and the host
// entry that picks the kernel and its chunks. Decode runs on tensor cores from sm_80
// (ops_attention_decode_tc.cu); this kernel serves older GPUs and NIBBLE_ATTN_TC=0 (the
// comparison). A CTA takes one (sequence, KV head, chunk of up to 256 keys) for HPC query heads of
// the group. The chunk's K and V rows arrive by cp.async in tiles of 8 KB each (32-128 keys by head
// dim and element type: FP16, or E4M3 codes whose row scales arrive with them), two tiles in
// flight, so a CTA waits on DRAM about once instead of once per dependent load of each lane; per
// tile it computes the scores (D/8 lanes per key), updates each head's running max and sum (online
// softmax), rescales and accumulates P.V.
// The grid is sized for max_pos_hint; each sequence spreads its keys over the grid's chunks
// (seq_chunk), and a CTA whose chunk starts past its query's position returns at once. A grid
// resident at once requests its first two tiles before griddepcontrol.wait (all rows but the new
// token's, which the kernel before stores).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "gemm_launch.cuh"
#include "nibble/cuda/ops.h"
#include "ops_attention_decode.cuh"

namespace nibble::cuda::ops {
using namespace detail;
using namespace attn;
using tc::cp_async16;
using tc::cp_async4;
using tc::cp_async_commit;
using tc::cp_async_wait;

namespace {

constexpr int kTileBytes = 8192;  // of K, and of V, per tile in shared memory
template <class Kv, int D>
constexpr int kTile = kTileBytes / (D * Kv::kElemBytes);  // keys per tile

template <class Kv, int D, int HPC>
__global__ void __launch_bounds__(kThreads) attention_decode_split_kernel(const DecodeArgs a) {
  constexpr int kKeys = kTile<Kv, D>;                // keys per tile
  constexpr int kRowBytes = D * Kv::kElemBytes;
  constexpr int kCpr = kRowBytes / 16;               // 16-byte copies per key row
  constexpr int kCopies = kTileBytes / 16;           // per tile of K (or V)
  constexpr int kLpk = D / 8;                        // lanes per key row (one word of 8 elements each)
  constexpr int kKpw = 32 / kLpk;                    // key rows per warp pass
  constexpr int kPasses = kKeys / (kWarps * kKpw);   // passes per warp over a tile
  using Word = typename Kv::Word;
  static_assert(kPasses * kWarps * kKpw == kKeys && kCopies % kThreads == 0);
  __shared__ uint4 s_kv[2][2][kCopies];  // [stage][K, V][key row of the tile][copy]
  __shared__ float s_sc[2][2][Kv::kScaled ? kKeys : 1];  // E4M3: the rows' scales
  __shared__ float s_p[HPC][kKeys];
  __shared__ float s_m[HPC], s_l[HPC], s_alpha[HPC];
  static_assert(sizeof(float) * kWarps * HPC * D <= sizeof(s_kv));
  float* s_red = reinterpret_cast<float*>(s_kv);  // [kWarps][HPC][D], after the last tile
  // Before griddepcontrol.wait only what the kernels before did not write: positions and slots
  // (copied before the step), and the cache rows older than the new token.
  const int b = blockIdx.z, heads_blocks = a.group / HPC;
  const int g = blockIdx.y / heads_blocks, h0 = g * a.group + (blockIdx.y % heads_blocks) * HPC;
  const int p = a.pos[b], s = a.slot[b];
  if (!decode_pos_ok(a, p, s)) {  // the host could not check it: make the rows visibly wrong
    pdl_wait();
    if (blockIdx.x == 0)
      for (int i = threadIdx.x; i < HPC * D; i += kThreads) a.out[(int64_t(b) * a.nh + h0) * D + i] = 0x7E00;
    return;
  }
  const int chunk = seq_chunk(a, p, kKeys), c0 = blockIdx.x * chunk;  // p checked: no overflow
  if (c0 > p) return;
  const int n = min(chunk, p + 1 - c0), tiles = (n + kKeys - 1) / kKeys;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % kLpk, kr = lane / kLpk;
  const KvHead kv = kv_head<Kv>(a.cache, D, (int64_t(s) * a.nkv + g) * a.max_ctx + c0);

  // Tile t's K and V rows (contiguous in the cache) into stage t % 2 as one cp.async group; rows
  // past the chunk are zero-filled (their scores are masked, so their p is 0).
  // skip: a row not copied (the new token's, when requested before the wait: written below by the
  // thread that reads it, so no other thread's copy may land on it later)
  auto load_tile = [&](int t, int skip) {
    if (t < tiles) {
#pragma unroll
      for (int i = threadIdx.x; i < 2 * kCopies; i += kThreads) {
        const int which = i / kCopies, c = i % kCopies, row = t * kKeys + c / kCpr;
        const uint8_t* src = (which ? kv.v : kv.k) + int64_t(min(row, n - 1)) * kRowBytes + (c % kCpr) * 16;
        if (row != skip) cp_async16(&s_kv[t & 1][which][c], src, row < n);
      }
      if constexpr (Kv::kScaled) {
        for (int i = threadIdx.x; i < 2 * kKeys; i += kThreads) {
          const int which = i / kKeys, r = i % kKeys, row = t * kKeys + r;
          if (row != skip) cp_async4(&s_sc[t & 1][which][r], (which ? kv.vs : kv.ks) + min(row, n - 1), row < n);
        }
      }
    }
    cp_async_commit();  // an empty group past the last tile keeps the wait count uniform
  };
  // With prewait the first two tiles load while the kernel before (the new token's KV store)
  // still runs: at batch 1 that took 1.5 us per layer off the step (H100, Llama-3.1-8B shape,
  // fp4-g128 372.6 -> 379.5 tok/s; at batch 16, whose grid takes two waves, it measured 1% slower:
  // docs/perf/decode-overlap-2026-11-27.md). The new token's row pr (in the last chunk) is then
  // read after the wait and written into its tile once that landed.
  // Everything the kernel before wrote (q, the new row) is read after the wait by coherent loads:
  // a read-only (.nc) load promises data constant for the kernel's lifetime, which with a
  // programmatic launch includes the kernel before.
  const int pr = a.prewait && p - c0 < n ? p - c0 : -1;
  if (a.prewait) load_tile(0, pr), load_tile(1, pr);
  pdl_wait();
  pdl_trigger();
  if (!a.prewait) load_tile(0, -1), load_tile(1, -1);
  uint4 fresh = {};
  float fresh_sc = 0.0f;
  if (pr >= 0 && pr < 2 * kKeys) {
    if (threadIdx.x < 2 * kCpr)
      fresh = __ldcg(reinterpret_cast<const uint4*>((threadIdx.x < kCpr ? kv.k : kv.v) + int64_t(pr) * kRowBytes +
                                                    (threadIdx.x % kCpr) * 16));
    if constexpr (Kv::kScaled)
      if (threadIdx.x >= 64 && threadIdx.x < 66) fresh_sc = __ldcg((threadIdx.x == 64 ? kv.ks : kv.vs) + pr);
  }

  float qv[HPC][8];
#pragma unroll
  for (int h = 0; h < HPC; ++h) {
    unpack8(__ldcg(reinterpret_cast<const uint4*>(a.q + (int64_t(b) * a.nh + h0 + h) * D + sub * 8)), qv[h]);
#pragma unroll
    for (int e = 0; e < 8; ++e) qv[h][e] *= a.qscale;
  }
  if (threadIdx.x < HPC) s_m[threadIdx.x] = -INFINITY, s_l[threadIdx.x] = 0.0f;

  // Online softmax over the chunk's tiles: per tile the scores, then per head the running max and
  // sum (and the factor that rescales the running P.V), then P.V, while the next tile loads.
  float acc[HPC][8] = {};
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<1>();
    if (t < 2 && pr >= 0 && pr / kKeys == t) {
      const int r = pr % kKeys;
      if (threadIdx.x < 2 * kCpr) s_kv[t & 1][threadIdx.x / kCpr][r * kCpr + threadIdx.x % kCpr] = fresh;
      if constexpr (Kv::kScaled)
        if (threadIdx.x >= 64 && threadIdx.x < 66) s_sc[t & 1][threadIdx.x - 64][r] = fresh_sc;
    }
    __syncthreads();
    const Word* ks = reinterpret_cast<const Word*>(s_kv[t & 1][0]);
    const Word* vs = reinterpret_cast<const Word*>(s_kv[t & 1][1]);
#pragma unroll
    for (int u = 0; u < kPasses; ++u) {
      const int r = (u * kWarps + warp) * kKpw + kr;
      float kf[8];
      Kv::unpack(ks[r * kLpk + sub], kf);
#pragma unroll
      for (int h = 0; h < HPC; ++h) {
        float dot = 0;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += qv[h][e] * kf[e];
#pragma unroll
        for (int o = kLpk / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if constexpr (Kv::kScaled) dot *= s_sc[t & 1][0][r];
        if (sub == 0) s_p[h][r] = t * kKeys + r < n ? dot : -INFINITY;
      }
    }
    __syncthreads();
    for (int h = warp; h < HPC; h += kWarps) {
      float mx = -INFINITY;
      for (int j = lane; j < kKeys; j += 32) mx = fmaxf(mx, s_p[h][j]);
      const float m_old = s_m[h], m_new = fmaxf(m_old, warp_max(mx));  // finite: the tile has a key
      float sum = 0;
      for (int j = lane; j < kKeys; j += 32) sum += (s_p[h][j] = exp2f(s_p[h][j] - m_new));
      sum = warp_sum(sum);
      __syncwarp();
      if (lane == 0) {
        const float alpha = exp2f(m_old - m_new);
        s_alpha[h] = alpha, s_m[h] = m_new, s_l[h] = s_l[h] * alpha + sum;
      }
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < HPC; ++h) {
      const float alpha = s_alpha[h];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[h][e] *= alpha;
    }
#pragma unroll
    for (int u = 0; u < kPasses; ++u) {
      const int r = (u * kWarps + warp) * kKpw + kr;
      float vf[8];
      Kv::unpack(vs[r * kLpk + sub], vf);
      const float vscale = Kv::kScaled ? s_sc[t & 1][1][r] : 1.0f;
#pragma unroll
      for (int h = 0; h < HPC; ++h) {
        const float pj = Kv::kScaled ? s_p[h][r] * vscale : s_p[h][r];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[h][e] += pj * vf[e];
      }
    }
    __syncthreads();  // stage t % 2 and s_p are free again
    load_tile(t + 2, -1);
  }

  // Lanes of the same columns (different key rows) add up, then the warps through shared memory.
#pragma unroll
  for (int h = 0; h < HPC; ++h)
#pragma unroll
    for (int e = 0; e < 8; ++e)
#pragma unroll
      for (int o = kLpk; o < 32; o <<= 1) acc[h][e] += __shfl_xor_sync(0xffffffffu, acc[h][e], o);
  if (kr == 0)
#pragma unroll
    for (int h = 0; h < HPC; ++h)
#pragma unroll
      for (int e = 0; e < 8; ++e) s_red[(warp * HPC + h) * D + sub * 8 + e] = acc[h][e];
  __syncthreads();
  if (threadIdx.x < HPC) ws_ml(a, b, h0 + threadIdx.x, D)[blockIdx.x] = make_float2(s_m[threadIdx.x], s_l[threadIdx.x]);
  for (int i = threadIdx.x; i < HPC * D; i += kThreads) {
    const int h = i / D, e = i % D;
    float sum = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += s_red[(w * HPC + h) * D + e];
    ws_acc(a, b, h0 + h, blockIdx.x, D)[e] = sum;
  }

  combine_if_last<D, HPC == 1 && D == 128 ? 8 : 16>(a, b, h0, p, chunk);  // 16 spills there
}

// Whether the environment variable `name` is set to "0" (the switches below turn a path off).
bool env_is_zero(const char* name) {
  const char* e = std::getenv(name);
  return e && std::strcmp(e, "0") == 0;
}

// NIBBLE_ATTN_TC=0 keeps decode attention on the CUDA-core kernel (for comparison).
bool tc_attention_enabled() {
  static const bool on = !env_is_zero("NIBBLE_ATTN_TC");
  return on;
}

template <class Kv, int D>
void launch_split(const DecodeArgs& a, dim3 grid, int hpc, cudaStream_t stream) {
  switch (hpc) {
    case 8: launch_pdl(attention_decode_split_kernel<Kv, D, 8>, grid, kThreads, 0, stream, a); break;
    case 4: launch_pdl(attention_decode_split_kernel<Kv, D, 4>, grid, kThreads, 0, stream, a); break;
    case 2: launch_pdl(attention_decode_split_kernel<Kv, D, 2>, grid, kThreads, 0, stream, a); break;
    default: launch_pdl(attention_decode_split_kernel<Kv, D, 1>, grid, kThreads, 0, stream, a); break;
  }
}

}  // namespace

namespace attn {
namespace {
std::atomic<int> g_cluster{-1};  // -1: from the environment
}
bool attention_cluster_enabled() {
  const int v = g_cluster.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  static const bool env_on = !env_is_zero("NIBBLE_ATTN_CLUSTER");
  return env_on;
}
}  // namespace attn

void set_attention_cluster(bool on) { attn::g_cluster.store(on ? 1 : 0, std::memory_order_relaxed); }

size_t attention_decode_workspace_bytes(int B, int nh, int d, int max_ctx) {
  require(B >= 0 && nh > 0 && d > 0 && max_ctx > 0, "attention_decode_workspace_bytes",
          "bad shape B=" + std::to_string(B) + " nh=" + std::to_string(nh) + " d=" + std::to_string(d) +
              " max_ctx=" + std::to_string(max_ctx));
  return size_t(B) * ws_stride(nh, d, max_ctx) * sizeof(float);
}

void attention_decode(const uint16_t* q, int B, const int32_t* slot, const int32_t* pos, int max_pos_hint,
                      const KvCache& cache, int nh, int nkv, int d, uint16_t* out, void* workspace,
                      cudaStream_t stream) {
  const char* fn = "attention_decode";
  require(d == 64 || d == 128, fn, "head dim d=" + std::to_string(d) + " is not supported (64, 128)");
  require(nh > 0 && nkv > 0 && nh % nkv == 0, fn,
          "nh=" + std::to_string(nh) + " must be a positive multiple of nkv=" + std::to_string(nkv));
  require(B >= 0 && B <= 65535, fn, "batch B=" + std::to_string(B) + " outside [0, 65535]");
  require_kv(cache, fn);
  const int max_ctx = cache.max_ctx;
  require(max_pos_hint >= 0 && max_pos_hint < max_ctx, fn,
          "max_pos_hint=" + std::to_string(max_pos_hint) + " outside [0, max_ctx=" + std::to_string(max_ctx) + ")");
  if (B == 0) return;
  require_ptr(q, fn, "q"), require_ptr(slot, fn, "slot"), require_ptr(pos, fn, "pos");
  require_ptr(out, fn, "out"), require_ptr(workspace, fn, "workspace");
  require(aligned16(q) && aligned16(workspace), fn, "q and workspace must be 16-byte aligned");

  const int group = nh / nkv;
  const bool on_tc = tc_attention_enabled() && tc::compute_capability() >= 80;
  const int hpc = on_tc ? tc_heads_per_cta(group) : group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
  const int slots = chunk_slots(max_ctx);
  const int64_t ctas_per_chunk = int64_t(B) * nkv * (group / hpc);
  auto n_chunks = [&](int chunk) { return (max_pos_hint + chunk) / chunk; };
  int chunk = kMaxChunk;
  bool cluster = false;
  if (on_tc) {
    const TcPlan plan = tc_plan(ctas_per_chunk, max_pos_hint, slots, cache, d);
    chunk = plan.chunk, cluster = plan.cluster;
  } else {
    // Shorter chunks when the grid would leave SMs idle (few sequences, short context), as long as
    // the chunks fit the workspace's slots. Target: 4 CTAs per SM (ncu at batch 16, ~530 keys, with
    // 2: 384 CTAs, 14% of the warps active; 4: +2.5% end to end, 8: the same as 4).
    while (chunk > 64 && ctas_per_chunk * n_chunks(chunk) < 4 * tc::sm_count() && n_chunks(chunk / 2) <= slots)
      chunk /= 2;
  }
  require(nkv * (group / hpc) <= 65535, fn, "too many heads for one launch");

  DecodeArgs a{q, slot, pos, cache, out, static_cast<float*>(workspace), ws_stride(nh, d, max_ctx),
               max_pos_hint, max_ctx, nh, nkv, group, slots, chunk,
               float(1.0 / std::sqrt(double(d)) * M_LOG2E), false, hpc};
  const dim3 grid{unsigned(n_chunks(chunk)), unsigned(nkv * (group / hpc)), unsigned(B)};
  if (on_tc) {
    launch_decode_tc(a, grid, d, cluster, stream);
    return check_launch(fn);
  }
  a.prewait = int64_t(grid.x) * grid.y * grid.z <= 4 * tc::sm_count();
  with_kv(cache, [&](auto kv) {
    using Kv = decltype(kv);
    if (d == 64) launch_split<Kv, 64>(a, grid, hpc, stream);
    else launch_split<Kv, 128>(a, grid, hpc, stream);
  });
  check_launch(fn);
}

}  // namespace nibble::cuda::ops

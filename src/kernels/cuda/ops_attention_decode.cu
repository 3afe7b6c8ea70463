// Split-K decode attention (flash-decoding). Kernel 1: a CTA takes one (sequence, KV head, chunk of
// up to 256 keys) for HPC query heads of the group. The chunk's K and V rows arrive by cp.async in
// tiles of 8 KB each (32-128 keys by head dim and element type: FP16, or E4M3 codes whose row
// scales arrive with them), two tiles in flight, so a CTA waits on DRAM about once instead of once
// per dependent load of each lane; per tile it computes the scores (D/8 lanes per key), updates
// each head's running max and sum (online softmax), rescales and accumulates P.V. The partial
// (max, sum, acc) goes to the workspace. Kernel 2 combines the chunks of each (sequence, head).
// The grid is sized for max_pos_hint; a CTA whose chunk starts past its query's position returns
// at once.
#include <algorithm>
#include <cmath>

#include "gemm_launch.cuh"
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"
#include "ops_kv.cuh"

namespace nibble::cuda::ops {
using namespace detail;
using tc::cp_async16;
using tc::cp_async4;
using tc::cp_async_commit;
using tc::cp_async_wait;

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxChunk = 256;
constexpr int kTileBytes = 8192;  // of K, and of V, per tile in shared memory
template <class Kv, int D>
constexpr int kTile = kTileBytes / (D * Kv::kElemBytes);  // keys per tile

int chunk_slots(int max_ctx) { return (max_ctx + kMaxChunk - 1) / kMaxChunk + 32; }

struct DecodeArgs {
  const uint16_t* q;
  const int32_t* slot;
  const int32_t* pos;
  KvCache cache;
  uint16_t* out;
  float* ws_acc;  // [B][nh][slots][d]
  float* ws_ml;   // [B][nh][slots][2]: max (base 2), sum
  int max_pos_hint, max_ctx, nh, nkv, group, slots, chunk;
  float qscale;  // 1/sqrt(d) * log2(e)
};

__device__ __forceinline__ bool decode_pos_ok(const DecodeArgs& a, int p, int s) {
  return p >= 0 && p <= a.max_pos_hint && p < a.max_ctx && s >= 0;
}

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
  pdl_wait();
  pdl_trigger();

  const int b = blockIdx.z, heads_blocks = a.group / HPC;
  const int g = blockIdx.y / heads_blocks, h0 = g * a.group + (blockIdx.y % heads_blocks) * HPC;
  const int p = a.pos[b], s = a.slot[b];
  const int c0 = blockIdx.x * a.chunk;
  if (!decode_pos_ok(a, p, s) || c0 > p) return;
  const int n = min(a.chunk, p + 1 - c0), tiles = (n + kKeys - 1) / kKeys;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % kLpk, kr = lane / kLpk;
  const KvHead kv = kv_head<Kv>(a.cache, D, (int64_t(s) * a.nkv + g) * a.max_ctx + c0);

  // Tile t's K and V rows (contiguous in the cache) into stage t % 2 as one cp.async group; rows
  // past the chunk are zero-filled (their scores are masked, so their p is 0).
  auto load_tile = [&](int t) {
    if (t < tiles) {
#pragma unroll
      for (int i = threadIdx.x; i < 2 * kCopies; i += kThreads) {
        const int which = i / kCopies, c = i % kCopies, row = t * kKeys + c / kCpr;
        const uint8_t* src = (which ? kv.v : kv.k) + int64_t(min(row, n - 1)) * kRowBytes + (c % kCpr) * 16;
        cp_async16(&s_kv[t & 1][which][c], src, row < n);
      }
      if constexpr (Kv::kScaled) {
        for (int i = threadIdx.x; i < 2 * kKeys; i += kThreads) {
          const int which = i / kKeys, r = i % kKeys, row = t * kKeys + r;
          cp_async4(&s_sc[t & 1][which][r], (which ? kv.vs : kv.ks) + min(row, n - 1), row < n);
        }
      }
    }
    cp_async_commit();  // an empty group past the last tile keeps the wait count uniform
  };
  load_tile(0);
  load_tile(1);

  float qv[HPC][8];
#pragma unroll
  for (int h = 0; h < HPC; ++h) {
    unpack8(__ldg(reinterpret_cast<const uint4*>(a.q + (int64_t(b) * a.nh + h0 + h) * D + sub * 8)), qv[h]);
#pragma unroll
    for (int e = 0; e < 8; ++e) qv[h][e] *= a.qscale;
  }
  if (threadIdx.x < HPC) s_m[threadIdx.x] = -INFINITY, s_l[threadIdx.x] = 0.0f;

  // Online softmax over the chunk's tiles: per tile the scores, then per head the running max and
  // sum (and the factor that rescales the running P.V), then P.V, while the next tile loads.
  float acc[HPC][8] = {};
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<1>();
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
    load_tile(t + 2);
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
  const int64_t ws = (int64_t(b) * a.nh + h0) * a.slots + blockIdx.x;  // (b, h0, chunk) slot index
  if (threadIdx.x < HPC) {
    a.ws_ml[(ws + int64_t(threadIdx.x) * a.slots) * 2] = s_m[threadIdx.x];
    a.ws_ml[(ws + int64_t(threadIdx.x) * a.slots) * 2 + 1] = s_l[threadIdx.x];
  }
  for (int i = threadIdx.x; i < HPC * D; i += kThreads) {
    const int h = i / D, e = i % D;
    float sum = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += s_red[(w * HPC + h) * D + e];
    a.ws_acc[(ws + int64_t(h) * a.slots) * D + e] = sum;
  }
}

// One CTA of D threads per (head, sequence): out = sum_c 2^(m_c - M) acc_c / sum_c 2^(m_c - M) l_c.
template <int D>
__global__ void __launch_bounds__(D) attention_decode_combine_kernel(const DecodeArgs a) {
  pdl_wait();
  pdl_trigger();
  const int h = blockIdx.x, b = blockIdx.y, e = threadIdx.x;
  const int p = a.pos[b], s = a.slot[b];
  uint16_t* o = a.out + (int64_t(b) * a.nh + h) * D;
  if (!decode_pos_ok(a, p, s)) {  // the host could not check it: make the row visibly wrong
    o[e] = 0x7E00;
    return;
  }
  const int nc = p / a.chunk + 1;
  const int64_t base = (int64_t(b) * a.nh + h) * a.slots;
  float mx = -INFINITY;
  for (int c = 0; c < nc; ++c) mx = fmaxf(mx, a.ws_ml[(base + c) * 2]);
  float l = 0, acc = 0;
  for (int c = 0; c < nc; ++c) {
    const float f = exp2f(a.ws_ml[(base + c) * 2] - mx);
    l += f * a.ws_ml[(base + c) * 2 + 1];
    acc += f * a.ws_acc[(base + c) * D + e];
  }
  o[e] = f2h(acc / l);
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

size_t attention_decode_workspace_bytes(int B, int nh, int d, int max_ctx) {
  require(B >= 0 && nh > 0 && d > 0 && max_ctx > 0, "attention_decode_workspace_bytes",
          "bad shape B=" + std::to_string(B) + " nh=" + std::to_string(nh) + " d=" + std::to_string(d) +
              " max_ctx=" + std::to_string(max_ctx));
  return size_t(B) * nh * chunk_slots(max_ctx) * (size_t(d) + 2) * sizeof(float);
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
  const int hpc = group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
  const int slots = chunk_slots(max_ctx);
  // Shorter chunks when the grid would leave SMs idle (few sequences, short context), as long as
  // the chunks fit the workspace's slots. Target: 4 CTAs per SM (ncu at batch 16, ~530 keys, with
  // 2: 384 CTAs, 14% of the warps active; 4: +2.5% end to end, 8: the same as 4).
  const int64_t ctas_per_chunk = int64_t(B) * nkv * (group / hpc);
  auto n_chunks = [&](int chunk) { return (max_pos_hint + chunk) / chunk; };
  int chunk = kMaxChunk;
  while (chunk > 64 && ctas_per_chunk * n_chunks(chunk) < 4 * tc::sm_count() && n_chunks(chunk / 2) <= slots)
    chunk /= 2;
  require(nkv * (group / hpc) <= 65535, fn, "too many heads for one launch");

  float* ws = static_cast<float*>(workspace);
  const DecodeArgs a{q, slot, pos, cache, out, ws, ws + size_t(B) * nh * slots * d,
                     max_pos_hint, max_ctx, nh, nkv, group, slots, chunk,
                     float(1.0 / std::sqrt(double(d)) * M_LOG2E)};
  const dim3 grid{unsigned(n_chunks(chunk)), unsigned(nkv * (group / hpc)), unsigned(B)};
  with_kv(cache, [&](auto kv) {
    using Kv = decltype(kv);
    if (d == 64) {
      launch_split<Kv, 64>(a, grid, hpc, stream);
      launch_pdl(attention_decode_combine_kernel<64>, dim3{unsigned(nh), unsigned(B)}, 64, 0, stream, a);
    } else {
      launch_split<Kv, 128>(a, grid, hpc, stream);
      launch_pdl(attention_decode_combine_kernel<128>, dim3{unsigned(nh), unsigned(B)}, 128, 0, stream, a);
    }
  });
  check_launch(fn);
}

}  // namespace nibble::cuda::ops

// Causal prefill attention over the KV cache (FP16 or E4M3): a flash-attention style kernel on CUDA
// cores. A CTA takes 32 "rows" = (query, head) pairs of one KV head (the GQA group's heads of
// consecutive queries, so the group shares each K/V tile), walks the keys in tiles of 32 held in
// shared memory and keeps an online softmax (running max m, sum l) per row; FP32 math, FP16 output.
// E4M3 keys are scaled into FP32 as they land in shared memory; E4M3 values stay codes there
// (exact in fp16) and their row scale multiplies the probability.
#include <cmath>

#include "nibble/cuda/ops.h"
#include "ops_common.cuh"
#include "ops_kv.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 128;  // 4 warps; warp w owns rows 8w..8w+7 in the softmax and P.V phases
constexpr int kRows = 32;
constexpr int kKeys = 32;
constexpr int kRowsPerWarp = kRows / (kThreads / 32);

struct PrefillArgs {
  const uint16_t* q;
  KvCache cache;
  int slot;
  uint16_t* out;
  int T, pos0, nh, group;
  float qscale;  // 1/sqrt(d) * log2(e): scores come out in base 2
};

template <int D>
struct __align__(16) PrefillSmem {
  float q[kRows][D + 4];  // +4: the float4 reads of 8 rows at once hit distinct banks
  float k[kKeys][D + 4];
  __half v[kKeys][D];     // FP16 values, or E4M3 codes as fp16 (their scale in vs)
  float vs[kKeys];
  float p[kRows][kKeys + 1];
};

// Loads the (zero-padded) K/V rows k0..k0+31 below kv_end, one word of 8 elements per load.
template <class Kv, int D>
__device__ void load_kv_tile(PrefillSmem<D>& sm, const KvHead& kv, int k0, int kv_end) {
  using Word = typename Kv::Word;
  constexpr int kVec = D / 8;
  const Word* kw8 = reinterpret_cast<const Word*>(kv.k);
  const Word* vw8 = reinterpret_cast<const Word*>(kv.v);
  for (int idx = threadIdx.x; idx < kKeys * kVec; idx += kThreads) {
    const int r = idx / kVec, c = (idx % kVec) * 8, key = k0 + r;
    Word kw{}, vw{};
    float ks = 0, vs = 0;
    if (key < kv_end) {
      kw = __ldg(kw8 + int64_t(key) * kVec + c / 8);
      vw = __ldg(vw8 + int64_t(key) * kVec + c / 8);
      if constexpr (Kv::kScaled) ks = __ldg(kv.ks + key), vs = __ldg(kv.vs + key);
    }
    float f[8];
    Kv::unpack(kw, f);
    if constexpr (Kv::kScaled)
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] *= ks;  // the CPU's dequantized value, bit for bit
    *reinterpret_cast<float4*>(&sm.k[r][c]) = make_float4(f[0], f[1], f[2], f[3]);
    *reinterpret_cast<float4*>(&sm.k[r][c + 4]) = make_float4(f[4], f[5], f[6], f[7]);
    *reinterpret_cast<uint4*>(&sm.v[r][c]) = Kv::half8(vw);
    if (Kv::kScaled && c == 0) sm.vs[r] = vs;
  }
}

// S = Q.K^T for the tile: thread (ty, tx) computes rows 2ty, 2ty+1 at keys tx + 8j.
template <int D>
__device__ void tile_scores(PrefillSmem<D>& sm) {
  const int ty = threadIdx.x / 8, tx = threadIdx.x % 8;
  float s[2][4] = {};
#pragma unroll 4
  for (int e = 0; e < D; e += 4) {
    const float4 a0 = *reinterpret_cast<const float4*>(&sm.q[2 * ty][e]);
    const float4 a1 = *reinterpret_cast<const float4*>(&sm.q[2 * ty + 1][e]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float4 b = *reinterpret_cast<const float4*>(&sm.k[tx + 8 * j][e]);
      s[0][j] += a0.x * b.x + a0.y * b.y + a0.z * b.z + a0.w * b.w;
      s[1][j] += a1.x * b.x + a1.y * b.y + a1.z * b.z + a1.w * b.w;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) sm.p[2 * ty][tx + 8 * j] = s[0][j], sm.p[2 * ty + 1][tx + 8 * j] = s[1][j];
}

template <class Kv, int D>
__global__ void __launch_bounds__(kThreads) attention_prefill_kernel(const PrefillArgs a) {
  __shared__ PrefillSmem<D> sm;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = blockIdx.y;
  const int n_rows = a.T * a.group;
  const int row0 = (gridDim.x - 1 - blockIdx.x) * kRows;  // the longest (latest) rows start first
  const int last_row = min(row0 + kRows, n_rows) - 1;
  const int kv_end = a.pos0 + last_row / a.group + 1;
  const int64_t qstride = int64_t(a.nh) * D;

  constexpr int kVec = D / 8;
  for (int idx = threadIdx.x; idx < kRows * kVec; idx += kThreads) {
    const int r = idx / kVec, c = (idx % kVec) * 8, row = row0 + r;
    float f[8] = {};
    if (row < n_rows) {
      const int t = row / a.group, h = g * a.group + row % a.group;
      unpack8(__ldg(reinterpret_cast<const uint4*>(a.q + t * qstride + int64_t(h) * D + c)), f);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) sm.q[r][c + i] = f[i] * a.qscale;
  }

  const KvHead kv = kv_head<Kv>(a.cache, D, (int64_t(a.slot) * gridDim.y + g) * a.cache.max_ctx);
  // The warp's rows: running max / sum (same in every lane), and the P.V accumulators of this
  // lane's columns 2*lane + 64*c (+1).
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][D / 32];
  int limit[kRowsPerWarp];  // the last key position each row may see (-1: no such row)
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = row0 + warp * kRowsPerWarp + i;
    m[i] = -INFINITY, l[i] = 0, limit[i] = row < n_rows ? a.pos0 + row / a.group : -1;
#pragma unroll
    for (int c = 0; c < D / 32; ++c) acc[i][c] = 0;
  }

  for (int k0 = 0; k0 < kv_end; k0 += kKeys) {
    __syncthreads();  // the previous tile is no longer read
    load_kv_tile<Kv>(sm, kv, k0, kv_end);
    __syncthreads();
    tile_scores(sm);
    __syncthreads();
    float alpha[kRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {  // online softmax, one key per lane
      const int r = warp * kRowsPerWarp + i;
      const float s = k0 + lane <= limit[i] ? sm.p[r][lane] : -INFINITY;
      const float m_new = fmaxf(m[i], warp_max(s));
      const float p = m_new == -INFINITY ? 0.0f : exp2f(s - m_new);
      alpha[i] = m_new == -INFINITY ? 1.0f : exp2f(m[i] - m_new);
      l[i] = l[i] * alpha[i] + warp_sum(p);
      m[i] = m_new;
      sm.p[r][lane] = p;
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i)
#pragma unroll
      for (int c = 0; c < D / 32; ++c) acc[i][c] *= alpha[i];
    for (int j = 0; j < kKeys; ++j) {
      float2 vj[D / 64];
#pragma unroll
      for (int c = 0; c < D / 64; ++c)
        vj[c] = __half22float2(*reinterpret_cast<const __half2*>(&sm.v[j][2 * lane + 64 * c]));
      const float vscale = Kv::kScaled ? sm.vs[j] : 1.0f;
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float p = Kv::kScaled ? sm.p[warp * kRowsPerWarp + i][j] * vscale : sm.p[warp * kRowsPerWarp + i][j];
#pragma unroll
        for (int c = 0; c < D / 64; ++c) acc[i][2 * c] += p * vj[c].x, acc[i][2 * c + 1] += p * vj[c].y;
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = row0 + warp * kRowsPerWarp + i;
    if (row >= n_rows) continue;
    const int t = row / a.group, h = g * a.group + row % a.group;
    uint16_t* o = a.out + t * qstride + int64_t(h) * D;
    const float inv = 1.0f / l[i];
#pragma unroll
    for (int c = 0; c < D / 64; ++c)
      *reinterpret_cast<__half2*>(o + 2 * lane + 64 * c) =
          __floats2half2_rn(acc[i][2 * c] * inv, acc[i][2 * c + 1] * inv);
  }
}

}  // namespace

void attention_prefill(const uint16_t* q, int T, int slot, int pos0, const KvCache& cache, int nh, int nkv, int d,
                       uint16_t* out, cudaStream_t stream) {
  const char* fn = "attention_prefill";
  require(d == 64 || d == 128, fn, "head dim d=" + std::to_string(d) + " is not supported (64, 128)");
  require(nh > 0 && nkv > 0 && nh % nkv == 0, fn,
          "nh=" + std::to_string(nh) + " must be a positive multiple of nkv=" + std::to_string(nkv));
  require_kv(cache, fn);
  require(T >= 0 && slot >= 0 && pos0 >= 0 && int64_t(pos0) + T <= cache.max_ctx, fn,
          "T=" + std::to_string(T) + " tokens at pos0=" + std::to_string(pos0) + " (slot " + std::to_string(slot) +
              ") do not fit max_ctx=" + std::to_string(cache.max_ctx));
  if (T == 0) return;
  require_ptr(q, fn, "q"), require_ptr(out, fn, "out");
  require(aligned16(q) && aligned16(out), fn, "q and out must be 16-byte aligned");
  const int group = nh / nkv;
  const int64_t blocks = (int64_t(T) * group + kRows - 1) / kRows;
  require(blocks <= 0x7fffffff && nkv <= 65535, fn, "too many queries or heads for one launch");
  const PrefillArgs a{q, cache, slot, out, T, pos0, nh, group, float(1.0 / std::sqrt(double(d)) * M_LOG2E)};
  const dim3 grid{unsigned(blocks), unsigned(nkv)};
  with_kv(cache, [&](auto kv) {
    using Kv = decltype(kv);
    if (d == 64)
      attention_prefill_kernel<Kv, 64><<<grid, kThreads, 0, stream>>>(a);
    else
      attention_prefill_kernel<Kv, 128><<<grid, kThreads, 0, stream>>>(a);
  });
  check_launch(fn);
}

}  // namespace nibble::cuda::ops

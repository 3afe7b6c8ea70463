#pragma once
// Split-K decode attention (flash-decoding): what its two kernels share, the CUDA-core one
// (ops_attention_decode.cu) and the tensor-core one (ops_attention_decode_tc.cu). A CTA takes one
// (sequence, KV head, chunk of keys) for a.hpc query heads of the group and writes the chunk's
// partial (max, sum, unnormalized P.V) to the workspace; the last CTA of a (sequence, head block)
// to finish (a counter in the workspace) combines the chunks' partials into the output. (The
// tensor-core kernel's cluster variant combines in distributed shared memory instead.)
#include <cmath>
#include <cstdint>

#include "ops_common.cuh"
#include "ops_kv.cuh"

namespace nibble::cuda::ops::attn {
using namespace detail;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxChunk = 256;
inline int chunk_slots(int max_ctx) { return (max_ctx + kMaxChunk - 1) / kMaxChunk + 32; }
// Floats of one sequence's workspace (DecodeArgs::ws), a multiple of 4 (16-byte aligned parts).
inline int64_t ws_stride(int nh, int d, int max_ctx) {
  return (int64_t(nh) * chunk_slots(max_ctx) * (d + 2) + 3) / 4 * 4 + (nh + 3) / 4 * 4;
}

struct DecodeArgs {
  const uint16_t* q;
  const int32_t* slot;
  const int32_t* pos;
  KvCache cache;
  uint16_t* out;
  // Per sequence b, at b * ws_stride floats (the same place whatever B is, so steps of different
  // B share one workspace): acc [nh][slots][d], then (max (base 2), sum) [nh][slots], then per
  // head group the chunks finished [round_up(nh, 4)] (unsigned, zero between launches).
  float* ws;
  int64_t ws_stride;
  int max_pos_hint, max_ctx, nh, nkv, group, slots, chunk;
  float qscale;  // 1/sqrt(d) * log2(e)
  bool prewait;  // request the first tiles before griddepcontrol.wait (a grid resident at once)
  int hpc;       // query heads per CTA (blockIdx.y: KV head * (group / hpc) + head block)
};

// Keys per chunk for a sequence at query position p. The grid's gridDim.x chunks of a.chunk keys
// cover max_pos_hint, the largest position of the captured step's bucket; a sequence short of that
// spreads its p + 1 keys evenly over the chunks, in whole tiles of `unit` keys, instead of filling
// the first chunks and leaving the rest idle (at ~530 keys and a hint of 1023, batch 16's two
// chunks of 512 took 512 and 19 keys; spread: batch 16 +2.0% int4-g128, +1.3% nvfp4, H200,
// docs/perf/attn-balance-2026-11-29.md).
__device__ __forceinline__ int seq_chunk(const DecodeArgs& a, int p, int unit) {
  const int per = (p + int(gridDim.x)) / int(gridDim.x);  // ceil((p + 1) / chunks)
  return min(a.chunk, (per + unit - 1) / unit * unit);
}

__device__ __forceinline__ float* ws_acc(const DecodeArgs& a, int b, int h, int c, int d) {
  return a.ws + b * a.ws_stride + (int64_t(h) * a.slots + c) * d;
}
__device__ __forceinline__ float2* ws_ml(const DecodeArgs& a, int b, int h, int d) {  // chunk 0 of head h
  return reinterpret_cast<float2*>(a.ws + b * a.ws_stride + int64_t(a.nh) * a.slots * d) + int64_t(h) * a.slots;
}
__device__ __forceinline__ unsigned* ws_done(const DecodeArgs& a, int b, int d) {
  return reinterpret_cast<unsigned*>(a.ws + b * a.ws_stride + int64_t(a.nh) * a.slots * (d + 2));
}

__device__ __forceinline__ bool decode_pos_ok(const DecodeArgs& a, int p, int s) {
  return p >= 0 && p <= a.max_pos_hint && p < a.max_ctx && s >= 0;
}

// After every thread of the CTA wrote its chunk's partials for heads h0 .. h0 + a.hpc - 1 of
// sequence b (query position p, `chunk` keys per chunk): the last of the sequence's p / chunk + 1
// chunk CTAs of this head block to get here combines them into the output (threadFenceReduction's
// pattern: each CTA's partials are visible device-wide before it counts itself). kFast: see below.
template <int D, int kFast>
__device__ __forceinline__ void combine_if_last(const DecodeArgs& a, int b, int h0, int p, int chunk) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ bool s_last;
  const int nc = p / chunk + 1;
  unsigned* done = ws_done(a, b, D) + blockIdx.y;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(done, 1u) == unsigned(nc - 1);
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  if (threadIdx.x == 0) *done = 0;  // for the next launch (stream-ordered after this one)
  // out = sum_c 2^(m_c - M) acc_c / sum_c 2^(m_c - M) l_c, one warp per head: the lanes take the
  // chunks' (max, sum) side by side, then D/32 columns each. Partials by L2 (__ldcg): other SMs
  // wrote them during this kernel. Up to kFast chunks (Llama-3.1-8B: 1024 keys at batch 1, 4096 at
  // batch 16) every partial is requested together with the (max, sum): one round trip to L2 where
  // the general path below takes one for the (max, sum), then one per 8 chunks (batch 16 +0.7 to
  // +1.2% end to end, docs/perf/gemv-ring-combine-2026-11-27.md).
  constexpr int kCols = D / 32;
  auto load_ml = [&](const float2* ml, int c) { return c < nc ? __ldcg(ml + c) : make_float2(-INFINITY, 0.0f); };
  auto load_part = [&](int h, int c, float (&part)[kCols]) {
    const float* src = ws_acc(a, b, h0 + h, c, D) + lane * kCols;
    if constexpr (kCols == 4) {
      const float4 t = __ldcg(reinterpret_cast<const float4*>(src));
      part[0] = t.x, part[1] = t.y, part[2] = t.z, part[3] = t.w;
    } else {
      const float2 t = __ldcg(reinterpret_cast<const float2*>(src));
      part[0] = t.x, part[1] = t.y;
    }
  };
  for (int h = warp; h < a.hpc; h += kWarps) {
    const float2* ml = ws_ml(a, b, h0 + h, D);
    const float2 ml0 = load_ml(ml, lane);
    float l = 0.0f, o[kCols] = {};
    if (nc <= kFast) {
      float part[kFast][kCols];
#pragma unroll
      for (int j = 0; j < kFast; ++j)
        if (j < nc) load_part(h, j, part[j]);
      const float mx = warp_max(ml0.x);  // finite: every chunk has a key
      const float f = exp2f(ml0.x - mx);  // 0 past the last chunk
      l = f * ml0.y;
#pragma unroll
      for (int j = 0; j < kFast; ++j) {
        const float fj = __shfl_sync(0xffffffffu, f, j);
        if (j < nc)
#pragma unroll
          for (int i = 0; i < kCols; ++i) o[i] += fj * part[j][i];
      }
    } else {
      // The first 32 chunks' (max, sum) stay in registers from the max pass.
      float mx = ml0.x;
      for (int c = lane + 32; c < nc; c += 32) mx = fmaxf(mx, __ldcg(ml + c).x);
      mx = warp_max(mx);
      for (int cb = 0; cb < nc; cb += 32) {
        const float2 v = cb == 0 ? ml0 : load_ml(ml, cb + lane);
        const float f = exp2f(v.x - mx);
        l += f * v.y;
        const int cn = min(32, nc - cb);
#pragma unroll 8
        for (int j = 0; j < cn; ++j) {
          const float fj = __shfl_sync(0xffffffffu, f, j);
          float part[kCols];
          load_part(h, cb + j, part);
#pragma unroll
          for (int i = 0; i < kCols; ++i) o[i] += fj * part[i];
        }
      }
    }
    l = warp_sum(l);
    uint16_t* out = a.out + (int64_t(b) * a.nh + h0 + h) * D + lane * kCols;
#pragma unroll
    for (int i = 0; i < kCols; ++i) out[i] = f2h(o[i] / l);
  }
}

// The tensor-core kernel (ops_attention_decode_tc.cu): its query heads per CTA for a group size
// (the largest divisor <= 8, the mma tile's 8 columns), its keys per chunk (a multiple of its
// 64-key tile) for ctas_per_chunk CTAs per chunk index and whether a sequence's chunks combine in
// a cluster, and its launch (sets a.prewait from its occupancy).
struct TcPlan {
  int chunk;
  bool cluster;
};
int tc_heads_per_cta(int group);
TcPlan tc_plan(int64_t ctas_per_chunk, int max_pos_hint, int slots, const KvCache& cache, int d);
void launch_decode_tc(DecodeArgs a, dim3 grid, int d, bool cluster, cudaStream_t stream);
// Whether the tensor-core kernel may combine in clusters (NIBBLE_ATTN_CLUSTER=0 or
// set_attention_cluster turn it off).
bool attention_cluster_enabled();

}  // namespace nibble::cuda::ops::attn

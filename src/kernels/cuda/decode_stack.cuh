#pragma once
// Every layer of a one-row decode step in one persistent kernel (sm_90; Llama layers: no q/k norms,
// no biases, an FP16 KV cache). Session 47 measured what the step's kernel boundaries cost: about
// 1.3 us each, seven per layer, a quarter of the batch-1 floor, with DRAM idle while each ramps
// (docs/perf/boundaries-2026-12-01.md). Here the weights never wait on a boundary:
//
// - One CTA per SM: 15 consumer warps and one producer warp (lane 0).
// - The weights do not depend on the step's data, so the producer streams all of them, layer after
//   layer, GEMV after GEMV, into a ring of shared-memory slots by bulk asynchronous copies (TMA)
//   completing on mbarriers, stopping only when the ring is full. A slot is kStackRows rows of a
//   weight (up to kStackSegK elements of each; longer rows take several slots), codes then
//   metadata, in the CUDA-core layout. Tile t of a GEMV runs on CTA (t + off) % grid, off carried
//   on from the GEMV before, so the tiles of a step spread evenly over the CTAs.
// - The consumers run the layer's ops in order, each CTA its share, with a grid-wide barrier where
//   an op needs the whole output of the one before (five per layer); while they wait there the
//   ring keeps filling. Per GEMV: X staged once per CTA in shared memory (the norms computed there,
//   in the order of rmsnorm_row.cuh); each slot split into 1-4 units over the warps (stack_gemv;
//   the persistent one-row GEMV's chunk_dot on ring slots); q/k/v stores RoPE'd q and the KV cache
//   rows (store_rope_pair), gate/up silu(gate) * up, o and down add to the FP32 residual.
// - Attention: one CTA per (KV head, chunk of keys), the group's query heads at once, an online
//   softmax per warp merged in shared memory; the last chunk of a head to finish combines.
//
// Status (docs/perf/decode-stack-2026-12-02.md): correct, and slower than the kernel-per-op step
// (8-layer Llama-3.1-8B shape, H200: 910 against 709 us a step), so it is off by default. CTA 0's
// timeline shows where: each barrier with its X staging and the slowest CTA's tail costs 3-15 us,
// attention ~13 us, more than the ring (~190 KB, ~6 us of DRAM time) covers.
#include <cuda_fp16.h>

#include <algorithm>

#include "decode_stack.h"
#include "device_info.h"
#include "gemv.cuh"
#include "gemv_stream.cuh"
#include "mbarrier.cuh"
#include "rmsnorm_row.cuh"

namespace nibble::cuda::detail {

__device__ __forceinline__ void stack_consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kStackConsumerThreads) : "memory");
}

// A barrier of every CTA's consumers (the producers never wait on one). count rises by one per CTA
// and barrier; `passed` is what it reaches at this one.
__device__ __forceinline__ void stack_grid_sync(unsigned* count, unsigned& passed) {
  passed += gridDim.x;
  stack_consumers_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1u);
    unsigned v;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(count) : "memory");
    } while (v < passed);
  }
  stack_consumers_sync();
}

// The GEMVs of a layer in the order they run.
__device__ __forceinline__ const StackGemv& stack_gemv_of(const StackLayerArgs& L, int i) {
  return i == 0 ? L.qkv : i == 1 ? L.o : i == 2 ? L.gate_up : L.down;
}
// This CTA's first tile of a GEMV whose tile t runs on CTA (t + off) % gridDim.x.
__device__ __forceinline__ int stack_first_tile(int off) {
  const int t = int(blockIdx.x) - off;
  return t < 0 ? t + int(gridDim.x) : t;
}

// The producer: every tile of every GEMV of the step that this CTA runs, in the consumers' order.
// issued: slots requested so far (stack_wait_slot).
__device__ __forceinline__ void stack_produce(const StackArgs& A, uint8_t* ring, uint64_t* full, uint64_t* empty,
                                              volatile unsigned* issued) {
  const int G = int(gridDim.x), NS = A.ring_slots;
  uint32_t i = 0, round = 0;  // slots requested; ring rounds completed (i / NS)
  int pos = 0, off = 0;       // i % NS
  for (int l = 0; l < A.n_layers; ++l)
    for (int op = 0; op < 4; ++op) {
      const StackGemv& g = stack_gemv_of(A.layers[l], op);
      const int tiles = g.a.N / kStackRows, segs = g.segs, q_row = g.q_row, s_row = g.s_row;
      const uint8_t* q0 = g.a.q;
      const uint8_t* m0 = g.a.scales;
      for (int t = stack_first_tile(off); t < tiles; t += G)
        for (int sg = 0; sg < segs; ++sg) {
          if (round > 0) tc::mbar_wait_spin(empty + pos, (round - 1) & 1);
          const int qb = g.seg_q[sg], sb = g.seg_s[sg];
          uint8_t* st = ring + size_t(pos) * A.slot_bytes;
          const uint8_t* q = q0 + int64_t(t) * kStackRows * q_row + g.seg_q0[sg];
          const uint8_t* m = m0 + int64_t(t) * kStackRows * s_row + g.seg_s0[sg];
          tc::mbar_expect_bytes(full + pos, uint32_t(kStackRows * (qb + sb)));
          if (segs == 1) {  // the tile's rows are contiguous: one copy of codes, one of metadata
            tc::bulk_load(st, q, uint32_t(kStackRows * qb), full + pos);
            tc::bulk_load(st + kStackRows * qb, m, uint32_t(kStackRows * sb), full + pos);
          } else {
#pragma unroll
            for (int r = 0; r < kStackRows; ++r) {
              tc::bulk_load(st + r * qb, q + int64_t(r) * q_row, uint32_t(qb), full + pos);
              tc::bulk_load(st + kStackRows * qb + r * sb, m + int64_t(r) * s_row, uint32_t(sb), full + pos);
            }
          }
          *issued = ++i;
          if (++pos == NS) pos = 0, ++round;
        }
      off += tiles % G;
      if (off >= G) off -= G;
    }
}

// Waits until ring slot i (the CTA's i-th) has landed. A warp takes only its own units, so it can run
// more than one round of the ring ahead of the producer, and an mbarrier's parity tells apart only
// two rounds: the warp first waits for the producer to have requested slot i (it has then seen
// slot i - NS consumed, so the full barrier's pending phase is slot i's).
// pos, round: i % NS, i / NS.
__device__ __forceinline__ void stack_wait_slot(uint64_t* full, const volatile unsigned* issued, uint32_t i, int pos,
                                                uint32_t round) {
  while (*issued <= i) __nanosleep(32);
  tc::mbar_wait(full + pos, round & 1);
}

// X for a GEMV from an fp16 vector in global memory (written by other CTAs in this launch: by L2),
// paired like F's decoder (stage_x_paired). Each thread requests up to 4 units before using any:
// one round trip to L2 for rows up to 4 x 8 x 480 elements, where a loop that used each unit
// before loading the next took one per unit.
template <class F>
__device__ __forceinline__ void stack_stage_x(const __half* src, int n, uint4* xs) {
  constexpr int B = 4;
  const uint4* s = reinterpret_cast<const uint4*>(src);
  for (int u0 = threadIdx.x; u0 < n / 8; u0 += B * kStackConsumerThreads) {
    uint4 v[B];
#pragma unroll
    for (int b = 0; b < B; ++b)
      if (u0 + b * kStackConsumerThreads < n / 8) v[b] = __ldcg(s + u0 + b * kStackConsumerThreads);
#pragma unroll
    for (int b = 0; b < B; ++b)
      if (const int u = u0 + b * kStackConsumerThreads; u < n / 8) {
        uint32_t p[4];
        pair_x8<F>(v[b], p);
        xs[u] = make_uint4(p[0], p[1], p[2], p[3]);
      }
  }
  stack_consumers_sync();
}

// X = fp16(rmsnorm(x) * w) over H (<= kStackMaxH), in rmsnorm_row.cuh's order (the bits of
// ops::rmsnorm and of the GEMV that normalizes its own X), paired like F's decoder. Every thread
// requests all of its elements of x and w at once (VI virtual threads x PER), so the norm waits on
// L2 once instead of once per element.
template <class F>
__device__ __forceinline__ void stack_stage_normed(const float* x, const float* w, int H, float eps, uint4* xs,
                                                   float* scratch) {
  constexpr int VI = (kNormThreads + kStackConsumerThreads - 1) / kStackConsumerThreads, PER = kStackMaxH / kNormThreads;
  const int VT = norm_virtual_threads(H);
  float v[VI][PER], wv[VI][PER];
#pragma unroll
  for (int i = 0; i < VI; ++i)
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int t = int(threadIdx.x) + kStackConsumerThreads * i, idx = t + VT * j;
      const bool ok = t < VT && idx < H;
      v[i][j] = ok ? __ldcg(x + idx) : 0.0f;
      wv[i][j] = ok ? __ldg(w + idx) : 0.0f;
    }
#pragma unroll
  for (int i = 0; i < VI; ++i) {
    if (kStackConsumerThreads * i >= VT) break;  // warp-uniform: VT is a multiple of 32
    const int t = int(threadIdx.x) + kStackConsumerThreads * i;
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < PER; ++j) ss = fmaf(v[i][j], v[i][j], ss);  // zeros past the row add nothing
    norm_group_sum(ss, unsigned(t / 32), t < VT, scratch);
  }
  stack_consumers_sync();
  const float r = norm_factor(norm_total(scratch, H), H, eps);
  __half* xh = reinterpret_cast<__half*>(xs);
#pragma unroll
  for (int i = 0; i < VI; ++i)
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int t = int(threadIdx.x) + kStackConsumerThreads * i, idx = t + VT * j;
      if (t < VT && idx < H) xh[idx] = norm_out(wv[i][j], v[i][j], r);
    }
  stack_consumers_sync();
  if constexpr (HalfDot<F>::value) {
    for (int u = threadIdx.x; u < H / 8; u += kStackConsumerThreads) {
      uint32_t p[4];
      pair_x8<F>(xs[u], p);
      xs[u] = make_uint4(p[0], p[1], p[2], p[3]);
    }
    stack_consumers_sync();
  }
}

// The consumers' share of one GEMV. A unit is one part of one slot of a tile (slot s of the
// tile's segs, part p of g.parts: the slot's chunks p, p + parts, ... of every 32); the CTA's
// units go to its warps in turn (u: units so far, over the GEMVs, so the turn moves on), each
// unit's warp sums into part_sums, and once every unit is done the sums of each row are added in
// unit order and stored (the same order whatever the timing). i: ring slots consumed so far.
// residual: o and down add fp16(output) to the FP32 residual (as ops::add_rmsnorm adds them);
// else the GEMV's own stores.
template <class F>
__device__ __forceinline__ void stack_gemv(const StackArgs& A, const StackGemv& g, const GemvArgs& a, int off,
                                           const __half* xs, const uint8_t* ring, uint64_t* full, uint64_t* empty,
                                           const volatile unsigned* issued, float* part_sums, uint32_t& i,
                                           uint32_t& u, bool residual) {
  constexpr int R = kStackRows;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, G = int(gridDim.x), NS = A.ring_slots;
  const int tiles = a.N / R, segs = g.segs, P = g.parts, per_tile = segs * P, first = stack_first_tile(off);
  int nt = 0;  // this CTA's tiles
  for (int t = first; t < tiles; t += G, ++nt, u += uint32_t(per_tile), i += uint32_t(segs)) {
    for (int k = int((uint32_t(warp) + kStackConsumers - u % kStackConsumers) % kStackConsumers); k < per_tile;
         k += kStackConsumers) {
      const int sg = k / P, pt = k % P;
      const uint32_t slot = i + uint32_t(sg);
      const int pos = int(slot % uint32_t(NS));
      stack_wait_slot(full, issued, slot, pos, slot / uint32_t(NS));
      const int qb = g.seg_q[sg], sb = g.seg_s[sg];
      const uint8_t* st = ring + size_t(pos) * A.slot_bytes;
      const int c0 = sg * (kStackSegK / F::kChunkK), nch = min(kStackSegK, a.K - sg * kStackSegK) / F::kChunkK;
      float acc[R][1];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][0] = 0.0f;
      for (int cl = lane + 32 * pt; cl < nch; cl += 32 * P) {
        uint4 wq[R][1];
        typename F::Meta meta[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          wq[r][0] = *reinterpret_cast<const uint4*>(st + r * qb + cl * 16);
          meta[r] = F::meta_of(ring_row_elem<F::kMetaBytes>(st + R * qb + r * sb, cl * F::kChunkK / F::kGroupK), a);
        }
        chunk_dot<F, 1, R, true>(a, wq, meta, c0 + cl, nullptr, xs, acc);
      }
      __syncwarp();
      if (lane == 0) tc::mbar_arrive(empty + pos, uint32_t(kStackMaxParts / P));  // all P parts: kStackMaxParts
      warp_sum_rows(acc);
      float* dst = part_sums + (nt * per_tile + k) * R;
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (lane == r) dst[r] = acc[r][0];
    }
  }
  stack_consumers_sync();
  for (int e = threadIdx.x; e < nt * (R / 2); e += kStackConsumerThreads) {
    const int lt = e / (R / 2), r = 2 * (e % (R / 2)), row = (first + lt * G) * R + r;
    const float* src = part_sums + lt * per_tile * R + r;
    float v0 = 0.0f, v1 = 0.0f;
    for (int k = 0; k < per_tile; ++k) v0 += src[k * R], v1 += src[k * R + 1];
    if (residual) {
      const float f = a.out_scale * out_factor<F>();
      __stcg(A.x + row, __ldcg(A.x + row) + __half2float(__float2half_rn(v0 * f)));
      __stcg(A.x + row + 1, __ldcg(A.x + row + 1) + __half2float(__float2half_rn(v1 * f)));
    } else {
      store_rows2(a, 0, row, v0, v1, out_factor<F>());
    }
  }
}

// Attention of the step's one query (position pos[0], cache slot slot[0]) for one layer: CTA u <
// nkv * chunks takes KV head u / chunks, keys of chunk u % chunks, all `group` query heads of that
// KV head. sm: stack_attn_bytes(D) of shared memory. Keys up to the query's position (its own row
// was stored by the q/k/v GEMV before the last grid barrier).
template <int D>
__device__ __forceinline__ void stack_attention(const StackArgs& A, const StackLayerArgs& L, float* sm, bool* s_last) {
  constexpr int C = D / 32;  // dims per lane
  static_assert(C == 2 || C == 4, "head dims 64 and 128");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int p = A.pos[0], s = A.slot[0];
  if (p < 0 || p >= A.max_ctx || s < 0) return;  // the host checks positions; nothing to read here
  const int n = p + 1, group = A.nh / A.nkv;
  int chunks = min(min(kStackMaxChunks, max(1, int(gridDim.x) / A.nkv)), (n + 31) / 32);
  const int chunk = (n + chunks - 1) / chunks;
  chunks = (n + chunk - 1) / chunk;
  const int u = int(blockIdx.x);
  if (u >= A.nkv * chunks) return;
  const int g = u / chunks, c = u % chunks, k0 = c * chunk, k1 = min(n, k0 + chunk);
  float* wm = sm;                                      // [warps][group]: each warp's max
  float* wl = sm + kStackConsumers * kStackMaxGroup;   // [warps][group]: its sum
  float* sacc = sm + 2 * kStackConsumers * kStackMaxGroup;  // [group][D + 1]: P.V, then the sum
  float* sq = sacc + kStackMaxGroup * (D + 1);               // [group][D]: the scaled queries
  for (int e = threadIdx.x; e < group * (D + 1); e += kStackConsumerThreads) sacc[e] = 0.0f;
  {  // the group's queries (up to 8 x 128 halves: 3 per thread), requested together
    constexpr int B = (kStackMaxGroup * D + kStackConsumerThreads - 1) / kStackConsumerThreads;
    __half qh[B];
#pragma unroll
    for (int b = 0; b < B; ++b)
      if (const int e = int(threadIdx.x) + b * kStackConsumerThreads; e < group * D) qh[b] = __ldcg(A.q + g * group * D + e);
#pragma unroll
    for (int b = 0; b < B; ++b)
      if (const int e = int(threadIdx.x) + b * kStackConsumerThreads; e < group * D) sq[e] = __half2float(qh[b]) * A.qscale;
  }
  stack_consumers_sync();

  float m[kStackMaxGroup], l[kStackMaxGroup], acc[kStackMaxGroup][C];
#pragma unroll
  for (int h = 0; h < kStackMaxGroup; ++h) {
    m[h] = -INFINITY, l[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < C; ++e) acc[h][e] = 0.0f;
  }
  const int64_t base = (int64_t(s) * A.nkv + g) * A.max_ctx;
  constexpr int U = 4;  // keys per warp in flight
  for (int k = k0 + warp; k < k1; k += U * kStackConsumers) {
    float kf[U][C], vf[U][C];
#pragma unroll
    for (int uu = 0; uu < U; ++uu) {
      const int key = min(k + uu * kStackConsumers, k1 - 1);
      const __half* kr = L.qkv.a.k_cache + (base + key) * D + lane * C;  // the caches q/k/v stores into
      const __half* vr = L.qkv.a.v_cache + (base + key) * D + lane * C;
#pragma unroll
      for (int e = 0; e < C; e += 2) {
        const float2 kk = __half22float2(__ldcg(reinterpret_cast<const __half2*>(kr + e)));
        const float2 vv = __half22float2(__ldcg(reinterpret_cast<const __half2*>(vr + e)));
        kf[uu][e] = kk.x, kf[uu][e + 1] = kk.y, vf[uu][e] = vv.x, vf[uu][e + 1] = vv.y;
      }
    }
#pragma unroll
    for (int uu = 0; uu < U; ++uu) {
      if (k + uu * kStackConsumers >= k1) break;  // warp-uniform
#pragma unroll
      for (int h = 0; h < kStackMaxGroup; ++h) {
        if (h >= group) break;
        float sc = 0.0f;
#pragma unroll
        for (int e = 0; e < C; ++e) sc = fmaf(sq[h * D + lane * C + e], kf[uu][e], sc);
        sc = warp_sum(sc);
        const float mn = fmaxf(m[h], sc), corr = exp2f(m[h] - mn), pr = exp2f(sc - mn);
        l[h] = l[h] * corr + pr;
#pragma unroll
        for (int e = 0; e < C; ++e) acc[h][e] = fmaf(pr, vf[uu][e], acc[h][e] * corr);
        m[h] = mn;
      }
    }
  }
  if (lane == 0)
    for (int h = 0; h < group; ++h) wm[warp * kStackMaxGroup + h] = m[h], wl[warp * kStackMaxGroup + h] = l[h];
  stack_consumers_sync();
  auto chunk_max = [&](int h) {
    float mx = -INFINITY;
    for (int w = 0; w < kStackConsumers; ++w) mx = fmaxf(mx, wm[w * kStackMaxGroup + h]);
    return mx;
  };
#pragma unroll
  for (int h = 0; h < kStackMaxGroup; ++h) {
    if (h >= group) break;
    const float mw = wm[warp * kStackMaxGroup + h];
    const float f = mw == -INFINITY ? 0.0f : exp2f(mw - chunk_max(h));
#pragma unroll
    for (int e = 0; e < C; ++e) atomicAdd(sacc + h * (D + 1) + lane * C + e, acc[h][e] * f);
    if (lane == 0) atomicAdd(sacc + h * (D + 1) + D, wl[warp * kStackMaxGroup + h] * f);
  }
  stack_consumers_sync();
  // this chunk's partials: P.V [D], max, sum per query head
  for (int e = threadIdx.x; e < group * (D + 2); e += kStackConsumerThreads) {
    const int h = e / (D + 2), k = e % (D + 2);
    const float v = k < D ? sacc[h * (D + 1) + k] : k == D ? chunk_max(h) : sacc[h * (D + 1) + D];
    __stcg(A.attn_ws + (int64_t(g * group + h) * kStackMaxChunks + c) * (D + 2) + k, v);
  }
  __threadfence();
  stack_consumers_sync();
  if (threadIdx.x == 0) {
    *s_last = atomicAdd(A.sync + 1 + g, 1u) == unsigned(chunks - 1);
    if (*s_last) A.sync[1 + g] = 0;  // for the next layer (a grid barrier away)
  }
  stack_consumers_sync();
  if (!*s_last) return;
  __threadfence();
  // The combine, in three passes with one wait on L2 each: every chunk's (max, sum) into shared
  // memory (sacc and sq are free again), then per query head the chunks' weights and the
  // denominator, then per output all chunks' P.V requested at once and added in chunk order.
  float* cmax = sacc;                                 // [group][kStackMaxChunks]
  float* csum = cmax + kStackMaxGroup * kStackMaxChunks;  // [group][kStackMaxChunks], then the weights
  float* den = csum + kStackMaxGroup * kStackMaxChunks;   // [group]
  const float* ws0 = A.attn_ws + int64_t(g * group) * kStackMaxChunks * (D + 2);  // head g * group, chunk 0
  for (int e = threadIdx.x; e < group * chunks; e += kStackConsumerThreads) {
    const int h = e / chunks, cc = e % chunks;
    const float* ws = ws0 + (h * kStackMaxChunks + cc) * (D + 2) + D;
    cmax[h * kStackMaxChunks + cc] = __ldcg(ws), csum[h * kStackMaxChunks + cc] = __ldcg(ws + 1);
  }
  stack_consumers_sync();
  if (int(threadIdx.x) < group) {
    const int h = threadIdx.x;
    float mx = -INFINITY, dn = 0.0f;
    for (int cc = 0; cc < chunks; ++cc) mx = fmaxf(mx, cmax[h * kStackMaxChunks + cc]);
    for (int cc = 0; cc < chunks; ++cc) {
      const float f = exp2f(cmax[h * kStackMaxChunks + cc] - mx);
      dn = fmaf(f, csum[h * kStackMaxChunks + cc], dn);
      csum[h * kStackMaxChunks + cc] = f;
    }
    den[h] = dn;
  }
  stack_consumers_sync();
  for (int e = threadIdx.x; e < group * D; e += kStackConsumerThreads) {
    const int h = e / D, k = e % D;
    const float* ws = ws0 + h * kStackMaxChunks * (D + 2) + k;
    float pv[kStackMaxChunks];
#pragma unroll
    for (int cc = 0; cc < kStackMaxChunks; ++cc) pv[cc] = cc < chunks ? __ldcg(ws + cc * (D + 2)) : 0.0f;
    float num = 0.0f;
#pragma unroll
    for (int cc = 0; cc < kStackMaxChunks; ++cc)
      if (cc < chunks) num = fmaf(csum[h * kStackMaxChunks + cc], pv[cc], num);
    A.att[(g * group + h) * D + k] = __float2half_rn(num / den[h]);
  }
}

template <class F, int D>
__global__ void __launch_bounds__(kStackThreads, 1) decode_stack_kernel(const StackArgs A) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(HalfDot<F>::value && F::kLutSize == 0 && F::kChunkBytes == 16, "fp16-pair decoders without tables");
  extern __shared__ __align__(128) uint8_t smem[];  // barriers, ring, X, attention, norm scratch
  __shared__ GemvArgs s_args;                       // the running GEMV's arguments
  __shared__ bool s_last;
  __shared__ unsigned s_issued;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + kStackMaxSlots;
  uint8_t* ring = smem + 2 * kStackMaxSlots * 8;
  uint4* xs = reinterpret_cast<uint4*>(ring + size_t(A.ring_slots) * A.slot_bytes);
  float* attn = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(xs) + A.x_bytes);
  float* scratch = attn + stack_attn_bytes(D) / 4;
  float* part_sums = scratch + 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) {
    for (int s = 0; s < A.ring_slots; ++s) tc::mbar_init(full + s, 1), tc::mbar_init(empty + s, kStackMaxParts);
    tc::fence_mbar_init();
    s_issued = 0;
  }
  __syncthreads();
  if (warp == kStackConsumers) {  // the weights are constant: no wait for the kernel before
    if (lane == 0) stack_produce(A, ring, full, empty, &s_issued);
    return;
  }
  pdl_wait();  // the embedding (x) and the step's position
  const __half* xh = reinterpret_cast<const __half*>(xs);
  uint32_t i = 0, u = 0;
  unsigned passed = 0;
  int off = 0;
  auto gemv = [&](const StackGemv& g, bool residual) {
    stack_gemv<F>(A, g, s_args, off, xh, ring, full, empty, &s_issued, part_sums, i, u, residual);
    off = (off + g.a.N / kStackRows) % int(gridDim.x);
    stack_grid_sync(A.sync, passed);
  };
  for (int l = 0; l < A.n_layers; ++l) {
    const StackLayerArgs& L = A.layers[l];
    if (threadIdx.x == 0) s_args = L.qkv.a;
    stack_stage_normed<F>(A.x, L.attn_norm, A.H, A.eps, xs, scratch);
    gemv(L.qkv, false);
    stack_attention<D>(A, L, attn, &s_last);
    stack_grid_sync(A.sync, passed);
    if (threadIdx.x == 0) s_args = L.o.a;
    stack_stage_x<F>(A.att, A.nh * D, xs);
    gemv(L.o, true);
    if (threadIdx.x == 0) s_args = L.gate_up.a;
    stack_stage_normed<F>(A.x, L.ffn_norm, A.H, A.eps, xs, scratch);
    gemv(L.gate_up, false);
    if (threadIdx.x == 0) s_args = L.down.a;
    stack_stage_x<F>(A.h, A.I, xs);
    gemv(L.down, true);
  }
#endif
}

// Raises the kernel's shared-memory limit once, then launches one CTA per SM (all resident at once:
// the grid barriers need it; a cooperative launch makes the driver check).
template <class F>
void launch_decode_stack(const StackArgs& a, cudaStream_t s) {
  auto kernel = a.d == 128 ? decode_stack_kernel<F, 128> : decode_stack_kernel<F, 64>;
  static const bool raised = [] {
    for (auto k : {decode_stack_kernel<F, 128>, decode_stack_kernel<F, 64>})
      NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kStackSmemMax)));
    return true;
  }();
  (void)raised;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(a.ctas));
  cfg.blockDim = dim3(kStackThreads);
  cfg.dynamicSmemBytes = stack_smem_bytes(a.ring_slots, a.slot_bytes, a.x_bytes, a.d, a.part_floats);
  cfg.stream = s;
  cudaLaunchAttribute attr[1]{};
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr, cfg.numAttrs = 1;
  NIBBLE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, a));
}

}  // namespace nibble::cuda::detail

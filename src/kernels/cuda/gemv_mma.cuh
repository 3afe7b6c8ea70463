#pragma once
// Tensor-core decode GEMV for M = 2..16 (paper 002's large-M dispatch): the weights are decoded in
// registers straight into mma.sync m16n8k16 A fragments (fp16), X rows are the B operand (one n8
// tile per 8 tokens), FP32 accumulators; the per-group scales multiply each tile's FP32 result.
// The decode work per weight no longer grows with M, which is what keeps M = 16 near M = 1.
//
// Kernel layout ("mma layout", repack_mma_tiles): per 16-row block and 64-element chunk of K,
// 512 bytes, 16 per lane. Lane (g = lane / 4, t = lane % 4) holds, for tile j = 0..3, one 32-bit
// word: rows g and g + 8 at k = 64c + 16j + 4t + {0..3}. Nibble p of that word: row g + 8 (p & 1),
// k offset 2 (p >> 1 & 1) + (p >> 2); so decode pair p (nibbles p, p + 4) is A register a_p.
// The mma's k slots {2t, 2t+1, 2t+8, 2t+9} stand for k = 16j + 4t + {0, 1, 2, 3}, so each lane's
// B fragment is one 8-byte load of X. Each tile lies inside one scale group (groups >= 16).
//
// CTA: one 16-row block; its 8 warps split the chunks of K, then add up through shared memory.
// M <= 8: each warp loads its next two chunks before decoding the current two (double buffer).
#include <cuda_fp16.h>

#include "decode.cuh"
#include "gemv.cuh"
#include "gemv_args.h"

namespace nibble::cuda::detail {

// d += A · B (FP32 accumulators in place).
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// F: a GEMV policy with kChunkK == 32 that also has decode_h (four fp16 pairs of one word) and
// kLutHalf (entries of an fp16 table, 0 if none).
template <class F, int NT>
__global__ void __launch_bounds__(kThreads) gemv_mma_kernel(const GemvArgs a) {
  // M <= 8 (one n tile): two chunks per warp and buffer, double-buffered (2 KB of weights in flight
  // per warp), and the 16-wide tiles of one scale group add up in the mma accumulators and are
  // scaled once. M > 8: both measured slower (2026-11-22 v2: Qwen3-32B gate_up int4 M=16 137 vs
  // 118 us), so four chunks per step, single buffer, each tile's result scaled on its own.
  constexpr bool kPrefetch = NT == 1;
  constexpr int U = kPrefetch ? 2 : 4;
  constexpr int kTilesPerGroup = !kPrefetch ? 1 : F::kGroupK >= 64 ? 4 : F::kGroupK / 16;
  __shared__ float red[kWarps][NT * 4][32];
  __shared__ __half lut[F::kLutHalf > 0 ? F::kLutHalf : 1];
  if constexpr (F::kLutHalf > 0) {
    for (int i = threadIdx.x; i < F::kLutHalf; i += kThreads) lut[i] = __float2half_rn(F::lut_entry(a, i));
    __syncthreads();
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int nchunks = a.K / 64;
  const int row0 = blockIdx.x * 16 + g, row1 = row0 + 8;
  const uint8_t* srow0 = a.scales + size_t(min(row0, a.N - 1)) * F::s_row_bytes(a.K);
  const uint8_t* srow1 = a.scales + size_t(min(row1, a.N - 1)) * F::s_row_bytes(a.K);
  const uint8_t* qblk = a.q + size_t(blockIdx.x) * nchunks * 512 + lane * 16;

  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;

  struct Stage {
    uint4 wq[U];
    typename F::Meta meta[U][2][2];  // [u][row g / g+8][first / second half of the chunk]
  };
  auto load = [&](Stage& st, int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = min(c0 + kWarps * u, nchunks - 1);  // a clamped duplicate is loaded, never used
      st.wq[u] = load_stream(qblk + size_t(c) * 512);
      st.meta[u][0][0] = F::load_meta(srow0, a, 2 * c);
      st.meta[u][0][1] = F::load_meta(srow0, a, 2 * c + 1);
      st.meta[u][1][0] = F::load_meta(srow1, a, 2 * c);
      st.meta[u][1][1] = F::load_meta(srow1, a, 2 * c + 1);
    }
  };
  auto compute = [&](const Stage& st, int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + kWarps * u;
      if (c >= nchunks) break;
      const uint32_t w[4] = {st.wq[u].x, st.wq[u].y, st.wq[u].z, st.wq[u].w};
      float d[NT][4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int hh = j >> 1, grp = F::kGroupK == 16 ? (j & 1) : 0;
        if (j % kTilesPerGroup == 0)
#pragma unroll
          for (int n = 0; n < NT; ++n) d[n][0] = d[n][1] = d[n][2] = d[n][3] = 0.0f;
        uint32_t A[4];
        F::decode_h(w[j], st.meta[u][0][hh], st.meta[u][1][hh], grp, a, lut, A);
        const __half* xk = a.x + size_t(c) * 64 + 16 * j + 4 * t;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const int token = n * 8 + g;
          uint2 b = make_uint2(0u, 0u);
          if (token < a.M) b = __ldg(reinterpret_cast<const uint2*>(xk + size_t(token) * a.K));
          mma_16816(d[n], A, b.x, b.y);
        }
        if (j % kTilesPerGroup == kTilesPerGroup - 1) {  // the group's FP32 sum times its scale, once
          const float s0 = F::scale(st.meta[u][0][hh], grp, a), s1 = F::scale(st.meta[u][1][hh], grp, a);
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            acc[n][0] = fmaf(d[n][0], s0, acc[n][0]);
            acc[n][1] = fmaf(d[n][1], s0, acc[n][1]);
            acc[n][2] = fmaf(d[n][2], s1, acc[n][2]);
            acc[n][3] = fmaf(d[n][3], s1, acc[n][3]);
          }
        }
      }
    }
  };
  constexpr int kStep = kWarps * U;
  if constexpr (kPrefetch) {  // the next step's chunks are in flight while this one is decoded
    Stage cur, nxt;
    int c0 = warp;
    if (c0 < nchunks) load(cur, c0);
    pdl_wait();  // the weights are constant: their first chunks load while the previous kernel ends
    pdl_trigger();
    for (; c0 < nchunks; c0 += kStep) {
      if (c0 + kStep < nchunks) load(nxt, c0 + kStep);
      compute(cur, c0);
      cur = nxt;
    }
  } else {
    pdl_wait();
    pdl_trigger();
    for (int c0 = warp; c0 < nchunks; c0 += kStep) {
      Stage cur;
      load(cur, c0);
      compute(cur, c0);
    }
  }
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[warp][n * 4 + i][lane] = acc[n][i];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) v += red[w][n * 4 + i][lane];
      const int token = n * 8 + 2 * t + (i & 1), row = (i < 2) ? row0 : row1;
      if (a.silu_pairs) {  // the pair's up row (g + 1) sits 4 lanes over
        const float vu = __shfl_xor_sync(0xFFFFFFFFu, v, 4);
        if ((g & 1) == 0 && token < a.M && row < a.N) store_silu_pair(a, token, row, v, vu, F::kOutFactor);
      } else if (token < a.M && row < a.N) {
        store_y(a, token, row, v, F::kOutFactor);
      }
    }
}

template <class F>
void launch_gemv_mma(const GemvArgs& a, cudaStream_t s) {
  const dim3 grid((a.N + 15) / 16);
  if (a.M <= 8) launch_pdl(gemv_mma_kernel<F, 1>, grid, kThreads, 0, s, a);
  else launch_pdl(gemv_mma_kernel<F, 2>, grid, kThreads, 0, s, a);
}

}  // namespace nibble::cuda::detail

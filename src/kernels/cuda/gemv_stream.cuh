#pragma once
// Streaming tensor-core GEMV for M = 1..16 on sm_90, every format with a tile layout
// (Engine::tensor_stream). The register-buffered GEMV (gemv_mma.cuh) keeps only each warp's next
// step in flight, in registers, so at 16 tokens ncu found DRAM 25-32% busy and the warps waiting on
// their loads (docs/perf/attn-balance-2026-11-29.md section 7). Here the loads are not the warps':
//
// - A persistent grid of one CTA per SM (at most): 16 consumer warps and one producer warp. The
//   CTA walks units of RB 16-row blocks (u = blockIdx.x, + gridDim.x, ...), each over all of K.
// - The producer streams each unit's weights, 16 x cpw chunks of every block per stage
//   (RingParams), into a ring of shared-memory stages with bulk asynchronous copies (TMA)
//   completing on mbarriers: per block one copy of the tile layout's chunks (codes, and the
//   fp16-scaled formats' scales after each chunk) and, for the FP32-scaled formats, one of the
//   block-major metadata of those chunks' groups. It runs ahead across units, so a unit's reduction
//   does not stall the stream. The weights are constant: the first stages are requested before the
//   programmatic-dependent-launch wait.
// - X [M, K] sits in shared memory once per CTA (rows padded by kRingXPadBytes so a warp's 16-byte
//   fragment loads hit distinct banks), copied by the producer after the wait in kRingXParts column
//   ranges with a barrier each, so the consumers start on the first chunks before all of X landed.
// - Consumer warp w decodes chunks w, w + 16, ... of each stage for the unit's RB blocks (mma_chunk,
//   as gemv_mma_kernel: one B fragment of X serves RB blocks), then arrives on the stage's empty
//   barrier; at a unit's end the 16 warps add up through shared memory and store.
// Shared memory decides the shapes it takes (ring_stages): X of M rows, the reduction and at least
// two stages within the opt-in limit. Opt-in: with one chunk per warp and stage it measured 0.67-0.96x
// the register-buffered kernel, its stages waiting on their hand-offs (docs/perf/ring16-2026-12-01.md).
#include <cuda_fp16.h>

#include <algorithm>

#include "device_info.h"
#include "gemv_args.h"
#include "gemv_mma.cuh"
#include "mbarrier.cuh"

namespace nibble::cuda::detail {

// The ring kernel's numbers of format F (the dispatcher knows them by format: gemv_args.h
// ring_shape, checked against these at compile time).
template <class F>
constexpr RingShape ring_shape_of() {
  return {kMmaChunkBytes<F>, meta_bytes_of<F>(), F::kScaledH ? 1 : F::kGroupK / 64};
}

// Row r's element of kBytes (4 or 2) in a ring's per-row array: a chunk's scales after its codes,
// or one group's metadata of a block.
template <int kBytes>
__device__ __forceinline__ uint32_t ring_row_elem(const uint8_t* rows, int r) {
  static_assert(kBytes == 4 || kBytes == 2, "ring row elements are 4 or 2 bytes");
  if constexpr (kBytes == 4) return reinterpret_cast<const uint32_t*>(rows)[r];
  else return reinterpret_cast<const unsigned short*>(rows)[r];
}

__device__ __forceinline__ void ring_consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(32 * kRingConsumers) : "memory");
}

template <class F, int NT, int RB>
__global__ void __launch_bounds__(kRingThreads, 1) gemv_ring_kernel(const GemvArgs a, const RingParams rp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr RingShape kShape = ring_shape_of<F>();
  constexpr int kChunkBytes = kShape.chunk_bytes, kGc = kShape.group_chunks;
  constexpr int kMetaBlockBytes = 16 * kShape.meta_bytes;  // one block's elements of one group
  const int nstages = rp.stages, chunks = kRingConsumers * rp.cpw;  // chunks per block and stage
  const int code_bytes = RB * chunks * kChunkBytes;  // a stage's codes; its metadata follow
  const int stage_bytes = ring_stage_bytes(kShape, RB, rp.cpw);
  extern __shared__ __align__(128) uint8_t smem[];  // ring [nstages][stage_bytes], red, X [M][row]
  __shared__ uint64_t full[kRingMaxStages], empty[kRingMaxStages], xbar[kRingXParts];
  float* red = reinterpret_cast<float*>(smem + size_t(nstages) * stage_bytes);
  uint8_t* xs = smem + size_t(nstages) * stage_bytes + ring_red_bytes(NT, RB);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nchunks = a.K / 64, nblocks = (a.N + 15) / 16, nunits = (nblocks + RB - 1) / RB;
  const size_t xrow_bytes = ring_x_row_bytes(a.K);
  if (threadIdx.x == 0) {
    for (int s = 0; s < nstages; ++s) tc::mbar_init(full + s, 1), tc::mbar_init(empty + s, kRingConsumers);
    for (int p = 0; p < kRingXParts; ++p) tc::mbar_init(xbar + p, 1);
    tc::fence_mbar_init();
  }
  __syncthreads();
  // The grid is at most one CTA per SM: once every CTA has started, the next kernel may launch its
  // CTAs onto the SMs as this grid's leave them.
  pdl_trigger();

  if (warp == kRingConsumers) {  // producer
    if (lane != 0) return;
    bool x_sent = false;
    auto send_x = [&] {  // X is the previous kernel's output: only after the wait
      pdl_wait();
      for (int p = 0; p < kRingXParts; ++p) {
        const int k0 = 64 * ring_x_part_begin(p, nchunks), k1 = 64 * ring_x_part_begin(p + 1, nchunks);
        if (k1 == k0) {
          tc::mbar_arrive(xbar + p);
          continue;
        }
        tc::mbar_expect_bytes(xbar + p, uint32_t(a.M) * uint32_t(k1 - k0) * 2u);
        for (int m = 0; m < a.M; ++m)
          tc::bulk_load(xs + m * xrow_bytes + size_t(k0) * 2, a.x + size_t(m) * a.K + k0, uint32_t(k1 - k0) * 2u,
                        xbar + p);
      }
      x_sent = true;
    };
    int s = 0;
    for (int u = blockIdx.x; u < nunits; u += gridDim.x)
      for (int c0 = 0; c0 < nchunks; c0 += chunks, ++s) {
        const int slot = s % nstages;
        if (s >= nstages) {
          if (!x_sent) send_x();
          const uint32_t parity = (s / nstages - 1) & 1;
          (rp.spin & 1) ? tc::mbar_wait_spin(empty + slot, parity) : tc::mbar_wait(empty + slot, parity);
        }
        const int nch = min(chunks, nchunks - c0);
        uint8_t* st = smem + size_t(slot) * stage_bytes;
        tc::mbar_expect_bytes(full + slot, RB * (nch * kChunkBytes + nch / kGc * kMetaBlockBytes));
#pragma unroll
        for (int b = 0; b < RB; ++b) {
          const size_t blk = size_t(min(u * RB + b, nblocks - 1));  // blocks past N re-read the last one
          tc::bulk_load(st + b * chunks * kChunkBytes, a.q + (blk * nchunks + c0) * kChunkBytes, nch * kChunkBytes,
                        full + slot);
          if constexpr (kMetaBlockBytes > 0)
            tc::bulk_load(st + code_bytes + b * (chunks / kGc) * kMetaBlockBytes,
                          a.scales + (blk * (nchunks / kGc) + c0 / kGc) * kMetaBlockBytes, nch / kGc * kMetaBlockBytes,
                          full + slot);
        }
      }
    if (!x_sent) send_x();
    return;
  }

  pdl_wait();  // the outputs may still be read by the kernel before
  const int g = lane >> 2, t = lane & 3;
  // This lane's B fragments: tiles 2h and 2h + 1 of token n * 8 + g at chunk c are xrow[n][8c + 4h]
  // (gemv_mma_kernel's order); tokens past M read the last row (their columns are never stored).
  const uint4* xrow[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n)
    xrow[n] = reinterpret_cast<const uint4*>(xs + size_t(min(n * 8 + g, a.M - 1)) * xrow_bytes) + t;
  int x_ready = 0;  // column ranges of X known to have landed
  constexpr int kVals = RB * NT * 4;
  int s = 0;
  for (int u = blockIdx.x; u < nunits; u += gridDim.x) {
    float acc[RB][NT][4], acc2[RB][NT][4];
#pragma unroll
    for (int b = 0; b < RB; ++b)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[b][n][i] = acc2[b][n][i] = 0.0f;
    for (int c0 = 0; c0 < nchunks; c0 += chunks, ++s) {
      const int slot = s % nstages, nch = min(chunks, nchunks - c0);
      while (x_ready < kRingXParts && ring_x_part_begin(x_ready, nchunks) < c0 + nch) tc::mbar_wait(xbar + x_ready++, 0);
      const uint32_t parity = (s / nstages) & 1;
      (rp.spin & 2) ? tc::mbar_wait_spin(full + slot, parity) : tc::mbar_wait(full + slot, parity);
      const uint8_t* st = smem + size_t(slot) * stage_bytes;
      for (int i = warp; i < nch; i += kRingConsumers) {  // chunk i of the stage
        uint4 wq[RB];
        typename F::Meta meta[RB][2][2];
#pragma unroll
        for (int b = 0; b < RB; ++b) {
          const uint8_t* ch = st + (b * chunks + i) * kChunkBytes;
          wq[b] = *reinterpret_cast<const uint4*>(ch + lane * 16);
          if constexpr (F::kScaledH) {
            constexpr int kB = F::kTileScaleBytes;
            tile_meta<F>(ring_row_elem<kB>(ch + 512, g), ring_row_elem<kB>(ch + 512, g + 8), tile_scale_sel(t), meta[b]);
          } else {
            const uint8_t* m = st + code_bytes + (b * (chunks / kGc) + i / kGc) * kMetaBlockBytes;
            meta[b][0][0] = F::meta_of(ring_row_elem<kShape.meta_bytes>(m, g), a);
            meta[b][1][0] = F::meta_of(ring_row_elem<kShape.meta_bytes>(m, g + 8), a);
          }
        }
        const int c = c0 + i;
        mma_chunk<F, NT, RB>(a, wq, meta, [&](int n, int h) { return xrow[n][8 * c + 4 * h]; }, acc, acc2);
      }
      __syncwarp();
      if (lane == 0) tc::mbar_arrive(empty + slot);
    }
    ring_consumers_sync();  // every warp has read the previous unit's sums
#pragma unroll
    for (int b = 0; b < RB; ++b)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[(warp * kVals + (b * NT + n) * 4 + i) * 32 + lane] = acc[b][n][i] + acc2[b][n][i];
    ring_consumers_sync();
    mma_store_sums<F, NT, RB, kRingConsumers>(a, red, warp, lane, u * RB);
  }
#endif
}

template <class F, int NT, int RB>
void launch_ring_config(const GemvArgs& a, cudaStream_t s) {
  constexpr RingShape kShape = ring_shape_of<F>();
  const RingParams rp = ring_params(kShape, NT, RB, a.M, a.K);  // stages > 0: the dispatcher checked
  // Once per kernel (the opt-in limit), so that launches inside a CUDA-graph capture make no
  // attribute calls.
  static const bool raised = [] {
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(gemv_ring_kernel<F, NT, RB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(kRingSmemLimit)));
    return true;
  }();
  (void)raised;
  const int units = ((a.N + 15) / 16 + RB - 1) / RB;
  const dim3 grid(unsigned(std::min(units, tc::sm_count())));
  launch_pdl(gemv_ring_kernel<F, NT, RB>, grid, kRingThreads,
             ring_smem_bytes(kShape, NT, RB, rp.cpw, a.M, a.K, rp.stages), s, a, rp);
}

// a.mma_row_blocks 16-row blocks per unit (1 or 2), one or two token tiles; the caller checked
// stream_kernel_fits.
template <class F, WeightKind kKind>
void launch_gemv_stream(const GemvArgs& a, cudaStream_t s) {
  static_assert(same_ring_shape(ring_shape_of<F>(), ring_shape(kKind)), "gemv_args.h ring_shape disagrees with the policy");
  const bool two = a.M > 8;
  if (a.mma_row_blocks == 1) two ? launch_ring_config<F, 2, 1>(a, s) : launch_ring_config<F, 1, 1>(a, s);
  else two ? launch_ring_config<F, 2, 2>(a, s) : launch_ring_config<F, 1, 2>(a, s);
}

}  // namespace nibble::cuda::detail

#pragma once
// Streaming tensor-core GEMV for M = 1..8 on sm_90 (NVFP4 and NVFP4-RaZeR weights). The register-
// buffered GEMVs keep only the next step's chunks in flight per warp, so the bytes in flight rise
// and fall with each warp's decode work: at one row both ran at ~70-77% of the copy bandwidth with
// DRAM half busy under ncu (docs/kernels.md). Here one producer warp streams the CTA's weights
// into a ring of shared-memory stages with bulk asynchronous copies (TMA, completing on mbarriers)
// while eight consumer warps decode and multiply, so every CTA keeps its ring's worth of loads in
// flight whatever the consumers are doing.
// Opt-in (Engine::tensor_stream): alone it is the fastest NVFP4 GEMV up to 4 rows, inside a decode
// step it measured slower than the kernels the dispatcher picks (docs/perf/gemv-stream-2026-11-23.md).
//
// Data: the tile layout of gemv_mma.cuh with the NVFP4 scales interleaved (per 16-row block and
// 64-element chunk, 512 code bytes, 16 per lane, then the block's 16 rows x 4 scale bytes; a
// block's chunks are contiguous), so each stage is one bulk copy per block: kChunks consecutive
// chunks of each of the CTA's RB blocks. X [M, K] sits in shared memory.
// Consumer warp w decodes chunks w, w + 8, ... of every stage (mma_chunk, as gemv_mma_kernel),
// then arrives on the stage's empty barrier; the producer refills a stage once all eight consumers
// arrived.
#include <cuda_fp16.h>

#include "gemv_mma.cuh"
#include "mbarrier.cuh"

namespace nibble::cuda::detail {

constexpr int kStreamConsumers = 8;  // consumer warps
constexpr int kStreamThreads = 32 * (kStreamConsumers + 1);
constexpr int kStreamSmemLimit = 232448 - 1024;  // sm_90's opt-in limit less the static barriers
constexpr int kStreamChunkBytes = int(kMmaScaledChunkBytes);  // a block's chunk: codes, then its rows' scales
// Chunks per consumer warp and stage: 4 measured best against 1 and 2 (H100, nvfp4 at M = 1 and 4,
// the four Llama-3.1-8B shapes, docs/perf/gemv-stream-2026-11-23.md): a stage's hand-off costs the
// same however much it carries.
constexpr int kStreamCpw = 4;

// RB row blocks per CTA, CPW chunks per consumer warp and stage, kStages stages (~36 KB of ring).
template <int RB, int CPW>
struct StreamCfg {
  static constexpr int kChunks = kStreamConsumers * CPW;  // chunks per block and stage
  static constexpr int kStageBytes = RB * kChunks * kStreamChunkBytes;
  static constexpr int kStages = 36 * 1024 / kStageBytes < 2 ? 2 : 36 * 1024 / kStageBytes;
  static constexpr size_t kRedBytes = size_t(kStreamConsumers) * RB * 4 * 32 * sizeof(float);
  static constexpr size_t smem_bytes(int M, int K) {
    return size_t(kStages) * kStageBytes + kRedBytes + size_t(M) * K * 2;
  }
};

template <class F, int RB, int CPW>
__global__ void __launch_bounds__(kStreamThreads) gemv_stream_kernel(const GemvArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(kMmaChunkBytes<F> == kStreamChunkBytes, "the stream kernel reads scales from the tile layout");
  using C = StreamCfg<RB, CPW>;
  extern __shared__ __align__(128) uint8_t smem[];  // ring [kStages][RB][kChunks][576], red, X [M][K]
  __shared__ uint64_t full[C::kStages], empty[C::kStages];
  float* red = reinterpret_cast<float*>(smem + C::kStages * C::kStageBytes);
  __half* xs = reinterpret_cast<__half*>(smem + C::kStages * C::kStageBytes + C::kRedBytes);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nchunks = a.K / 64, nblocks = (a.N + 15) / 16, blk0 = blockIdx.x * RB;
  const int nstages = (nchunks + C::kChunks - 1) / C::kChunks;
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) tc::mbar_init(full + s, 1), tc::mbar_init(empty + s, kStreamConsumers);
    tc::fence_mbar_init();
  }
  __syncthreads();

  if (warp == kStreamConsumers) {  // producer: the weights are constant, so no pdl_wait before them
    if (lane >= RB) return;
    const int blk = min(blk0 + lane, nblocks - 1);  // blocks past N re-read the last one
    const uint8_t* src = a.q + size_t(blk) * nchunks * kStreamChunkBytes;
    for (int s = 0; s < nstages; ++s) {
      const int slot = s % C::kStages;
      if (s >= C::kStages) tc::mbar_wait(empty + slot, (s / C::kStages - 1) & 1);
      const int c0 = s * C::kChunks, nch = min(C::kChunks, nchunks - c0);
      if (lane == 0) tc::mbar_expect_bytes(full + slot, RB * nch * kStreamChunkBytes);
      if constexpr (RB > 1) __syncwarp((1u << RB) - 1);
      tc::bulk_load(smem + slot * C::kStageBytes + lane * C::kChunks * kStreamChunkBytes,
                    src + size_t(c0) * kStreamChunkBytes, nch * kStreamChunkBytes, full + slot);
    }
    return;
  }

  pdl_wait();
  {  // X into shared memory, by the consumer warps (named barrier 1: the producer does not join)
    const uint4* src = reinterpret_cast<const uint4*>(a.x);
    uint4* dst = reinterpret_cast<uint4*>(xs);
    for (int i = threadIdx.x; i < a.M * a.K / 8; i += 32 * kStreamConsumers) dst[i] = __ldg(src + i);
    asm volatile("bar.sync 1, %0;\n" ::"n"(32 * kStreamConsumers) : "memory");
  }
  const int g = lane >> 2, t = lane & 3;
  const bool xon = g < a.M;
  const uint4* xrow = reinterpret_cast<const uint4*>(xs + size_t(min(g, a.M - 1)) * a.K + 8 * t);
  float acc[RB][1][4], acc2[RB][1][4];
#pragma unroll
  for (int b = 0; b < RB; ++b)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[b][0][i] = acc2[b][0][i] = 0.0f;

  for (int s = 0; s < nstages; ++s) {
    const int slot = s % C::kStages;
    tc::mbar_wait(full + slot, (s / C::kStages) & 1);
#pragma unroll
    for (int cw = 0; cw < CPW; ++cw) {
      const int i = warp + kStreamConsumers * cw, c = s * C::kChunks + i;  // chunk i of the stage
      if (c >= nchunks) break;
      uint4 wq[RB];
      typename F::Meta meta[RB][2][2];
#pragma unroll
      for (int b = 0; b < RB; ++b) {
        const uint8_t* ch = smem + slot * C::kStageBytes + (b * C::kChunks + i) * kStreamChunkBytes;
        wq[b] = *reinterpret_cast<const uint4*>(ch + lane * 16);
        const uint32_t* sc = reinterpret_cast<const uint32_t*>(ch + 512);
        tile_meta<F>(sc[g], sc[g + 8], tile_scale_sel(t), meta[b]);
      }
      mma_chunk<F, 1, RB>(
          a, wq, meta, [&](int, int h) { return xon ? xrow[8 * c + 4 * h] : make_uint4(0u, 0u, 0u, 0u); }, acc, acc2);
    }
    __syncwarp();
    if (lane == 0) tc::mbar_arrive(empty + slot);
  }

  // Only now may the next kernel's CTAs start: launched earlier, they would hold shared memory and
  // SM slots that this grid's later CTAs need, and a next stream GEMV's producers would start
  // reading their weights beside this one's (e2e batch 1 measured 5% slower with the trigger at
  // the top).
  pdl_trigger();
  constexpr int kVals = RB * 4;
#pragma unroll
  for (int b = 0; b < RB; ++b)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[(warp * kVals + b * 4 + i) * 32 + lane] = acc[b][0][i] + acc2[b][0][i];
  asm volatile("bar.sync 1, %0;\n" ::"n"(32 * kStreamConsumers) : "memory");
  mma_store_sums<F, 1, RB, kStreamConsumers>(a, red, warp, lane, blk0);
#endif
}

template <class F, int RB, int CPW>
void launch_stream_config(const GemvArgs& a, cudaStream_t s) {
  const size_t smem = StreamCfg<RB, CPW>::smem_bytes(a.M, a.K);
  // Once per kernel (the largest size stream_fits allows), so that launches inside a CUDA-graph
  // capture make no attribute calls.
  static const bool raised = [] {
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(gemv_stream_kernel<F, RB, CPW>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, kStreamSmemLimit));
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(gemv_stream_kernel<F, RB, CPW>,
                                           cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    return true;
  }();
  (void)raised;
  const dim3 grid((a.N + 16 * RB - 1) / (16 * RB));
  launch_pdl(gemv_stream_kernel<F, RB, CPW>, grid, kStreamThreads, smem, s, a);
}

// a.mma_row_blocks 16-row blocks per CTA (1, 2, 4); the caller checked stream_fits.
template <class F>
void launch_gemv_stream(const GemvArgs& a, cudaStream_t s) {
  switch (a.mma_row_blocks) {
    case 1: launch_stream_config<F, 1, kStreamCpw>(a, s); break;
    case 2: launch_stream_config<F, 2, kStreamCpw>(a, s); break;
    default: launch_stream_config<F, 4, kStreamCpw>(a, s); break;
  }
}

}  // namespace nibble::cuda::detail

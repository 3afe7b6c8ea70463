#pragma once
// Host-side launch of gemm_core.cuh: tile choice by M, split-K choice by the SM count, the
// split-K reduction, error checks.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "device_info.h"
#include "gemm_core.cuh"
#include "nibble/cuda/check.h"
#include "nibble/cuda/gemm.h"

namespace nibble::cuda::tc {

template <class T, class Mma, class BOp>
__global__ void __launch_bounds__(T::THREADS, 2)
    gemm_kernel(MainArgs g, typename BOp::Params bp, EpilogueArgs e) {
  gemm_tile<T, Mma, BOp>(g, bp, e);
}

// y[m, n] = alpha * row_scale[m] * sum over splits of partial[s, m, n].
void splitk_reduce(const float* partial, int splits, int M, int N, const float* row_scale, float alpha, uint16_t* y,
                   cudaStream_t stream);

// fp16 paths (dequantizing B): warps side by side along N, so no two warps dequantize the same B
// fragment (measured faster for W4A16). e4m3 path (B used as stored): 2 x 4 warps (measured faster).
// Few rows are memory-bound: deeper pipelines (more weight bytes in flight per SM) at small M.
template <class Mma>
struct Tiles {
  using Tiny = Tile<16, 128, 1, 8, 8>;    // M <= 16: warp tile 16 x 16, 8 stages
  using Small = Tile<64, 128, 1, 8, 5>;   // M <= 64: warp tile 64 x 16
  using Large = Tile<128, 128, 1, 8, 3>;  // warp tile 128 x 16
};
template <>
struct Tiles<MmaE4M3> {
  using Tiny = Tile<64, 128, 2, 4, 3>;
  using Small = Tile<64, 128, 2, 4, 3>;   // warp tile 32 x 32
  using Large = Tile<128, 128, 2, 4, 3>;  // warp tile 64 x 32
};

struct Problem {
  const uint8_t* a;
  int64_t a_row_bytes;  // K * bytes per activation element
  int M, N;
  const float* row_scale;
  float alpha;
  uint16_t* y;
};

template <class T, class Mma, class BOp>
void launch_tile(const Problem& p, const typename BOp::Params& bp, GemmWorkspace& ws, int split_k,
                 cudaStream_t stream) {
  const int k_tiles = int(p.a_row_bytes / kStageABytes);
  const int tiles = ((p.M + T::BM - 1) / T::BM) * ((p.N + T::BN - 1) / T::BN);
  int splits = split_k;
  if (splits <= 0) {  // fill about two CTAs per SM, keeping at least 8 stages per split
    splits = std::max(1, std::min({(2 * sm_count() + tiles / 2) / tiles, k_tiles / 8, 16}));
  }
  splits = std::clamp(splits, 1, k_tiles);
  const int per = (k_tiles + splits - 1) / splits;
  splits = (k_tiles + per - 1) / per;

  MainArgs g{p.a, p.a_row_bytes, p.M, p.N, k_tiles, per};
  EpilogueArgs e{p.y, nullptr, p.row_scale, p.alpha, p.M, p.N};
  if (splits > 1) e.partial = static_cast<float*>(ws.get(size_t(splits) * p.M * p.N * sizeof(float)));

  constexpr int smem = smem_bytes<T, BOp>();
  auto kernel = gemm_kernel<T, Mma, BOp>;
  // Once per kernel, so that launches inside a CUDA-graph capture make no attribute calls.
  static const bool raised = [&] {
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    return true;
  }();
  (void)raised;
  dim3 grid((p.M + T::BM - 1) / T::BM, (p.N + T::BN - 1) / T::BN, splits);
  kernel<<<grid, T::THREADS, smem, stream>>>(g, bp, e);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
  if (splits > 1) splitk_reduce(e.partial, splits, p.M, p.N, p.row_scale, p.alpha, p.y, stream);
}

template <class Mma, class BOp>
void launch(const Problem& p, const typename BOp::Params& bp, GemmWorkspace& ws, int split_k, cudaStream_t stream) {
  using Tiny = typename Tiles<Mma>::Tiny;
  using Small = typename Tiles<Mma>::Small;
  using Large = typename Tiles<Mma>::Large;
  if (p.M <= Tiny::BM)
    launch_tile<Tiny, Mma, BOp>(p, bp, ws, split_k, stream);
  else if (p.M <= Small::BM)
    launch_tile<Small, Mma, BOp>(p, bp, ws, split_k, stream);
  else
    launch_tile<Large, Mma, BOp>(p, bp, ws, split_k, stream);
}

}  // namespace nibble::cuda::tc

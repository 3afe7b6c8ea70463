#pragma once
// Host side of the wgmma GEMMs: split-K, the TMA descriptors, the launch with its split-K
// reduction, error checks.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "gemm_launch.cuh"
#include "gemm_wgmma_core.cuh"
#include "nibble/cuda/check.h"
#include "nibble/error.h"

namespace nibble::cuda::wg {

// How TMA lays a box out in shared memory: as is, or with the 16-byte chunks of each 128-byte row
// swizzled (wgmma's operand layout).
enum class Swizzle { none, b128 };

// A 2-D TMA descriptor over a row-major [outer, inner] array of elem_bytes-byte elements (1, 2 or 4),
// rows row_bytes apart, boxes of box_inner x box_outer elements. Throws nibble::Error naming `what`
// when the driver rejects it.
CUtensorMap tensor_map_2d(const void* base, int elem_bytes, uint64_t inner, uint64_t outer, uint64_t row_bytes,
                          uint32_t box_inner, uint32_t box_outer, Swizzle swizzle, const char* what);

// Split-K for `tiles` output tiles of k_tiles 64-wide k-tiles each. Default: at most one CTA per
// SM and at least 8 k-tiles per split: CTAs past the SM count cost a whole tile time again
// (measured in docs/perf/gemm-notes.md, "split-K"). A compute-bound kernel that states its pace
// (ktile_us > 0: microseconds per k-tile of one CTA) gets the split with the least estimated time
// instead: waves of one CTA per SM x (k-tiles per CTA x pace + ~2 us to fill and drain a CTA),
// plus the FP32 partials written and read once each at ~3 TB/s; a split is taken only when it is
// estimated 5% faster. Where the tiles fill 1-2 uneven waves and K is long, a few splits even the
// waves out (docs/perf/gemm-notes.md, "split-K by estimated time").
inline int auto_splits(int tiles, int k_tiles, int64_t mn, double ktile_us) {
  const int sms = tc::sm_count(), most = std::max(1, std::min(k_tiles / 8, 16));
  if (ktile_us <= 0) return std::max(1, std::min(sms / tiles, most));
  int best = 1;
  double best_us = 0;
  for (int s = 1; s <= most; ++s) {
    const int per = (k_tiles + s - 1) / s, used = (k_tiles + per - 1) / per;
    const int64_t waves = (int64_t(tiles) * used + sms - 1) / sms;
    const double us = double(waves) * (per * ktile_us + 2.0) + (used > 1 ? double(mn) * 8.0 * used / 3e6 : 0.0);
    if (s == 1 || us < 0.95 * best_us) best = used, best_us = us;
  }
  return best;
}

template <class C, class WOp, auto kernel>
void launch_cfg(const tc::Problem& p, const typename WOp::Params& bp, GemmWorkspace& ws, int split_k,
                cudaStream_t stream) {
  const int k_tiles = int(p.a_row_bytes / kRowBytes);
  const int tiles = ((p.M + C::BM - 1) / C::BM) * ((p.N + C::BN - 1) / C::BN);
  int splits = split_k;
  if (splits <= 0) splits = auto_splits(tiles, k_tiles, int64_t(p.M) * p.N, C::KTILE_US);
  splits = std::clamp(splits, 1, k_tiles);
  const int per = (k_tiles + splits - 1) / splits;
  splits = (k_tiles + per - 1) / per;

  tc::MainArgs g{p.a, p.a_row_bytes, p.M, p.N, k_tiles, per};
  tc::EpilogueArgs e{p.y, nullptr, p.row_scale, p.alpha, p.M, p.N};
  if (splits > 1) e.partial = static_cast<float*>(ws.get(size_t(splits) * p.M * p.N * sizeof(float)));

  constexpr int smem = C::SMEM;
  // Once per kernel, so that launches inside a CUDA-graph capture make no attribute calls.
  static const bool raised = [&] {
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)raised;
  dim3 grid((p.M + C::BM - 1) / C::BM, (p.N + C::BN - 1) / C::BN, splits);
  const CUtensorMap map_a = tensor_map_2d(p.a, 2, uint64_t(p.a_row_bytes / 2), uint64_t(p.M), uint64_t(p.a_row_bytes),
                                          kBK, C::BM, Swizzle::b128, "activations");
  kernel<<<grid, C::THREADS, smem, stream>>>(g, map_a, bp, e);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
  if (splits > 1) tc::splitk_reduce(e.partial, splits, p.M, p.N, p.row_scale, p.alpha, p.y, stream);
}

}  // namespace nibble::cuda::wg

#pragma once
// The first pass over FP32 logits shared by the entropies and the sampler: rows split in chunks so
// that few rows still fill the GPU, each chunk's argmax and its sums of exponentials relative to
// its own max; combine_partials turns a row's chunks into its max, argmax and entropy.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops_common.cuh"

namespace nibble::cuda::ops::detail {

// A chunk's statistics relative to its own max m: zs = sum e^(z - m), za = sum e^(z - m) (z - m).
struct Partial {
  ArgMax best;
  double zs, za;
};

// How rows [B, V] are split: `chunks` chunks of `len` tokens (a multiple of 4, so that float4
// loads stay aligned; the last chunk may be shorter or empty).
struct Chunking {
  int chunks, len;
};
Chunking logit_chunking(int B, int V);

// Launches the chunk pass over rows [B, V] into parts ([B][chunks]). With `zero`, the kernel also
// clears zero[0 .. B * zero_per_row) (a buffer the next kernel accumulates into). parts must hold
// logit_partials_capacity(B) entries.
void launch_logit_partials(const float* logits, int B, int V, Chunking ch, Partial* parts, uint64_t* zero,
                           int zero_per_row, cudaStream_t stream);
size_t logit_partials_capacity(int B);

struct RowStats {
  ArgMax best;   // best.i == 0x7fffffff: no finite, non-NaN logit
  float entropy;  // nats at temperature 1; NaN without a best
};

// One warp: the row's chunks rebased to the row's max M; H = log Z - A / Z. Every lane gets it.
__device__ inline RowStats combine_partials(const Partial* p, int chunks) {
  const int lane = threadIdx.x & 31;
  ArgMax best{-INFINITY, 0x7fffffff};
  for (int c = lane; c < chunks; c += 32) best = better(best, p[c].best);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    best = better(best, ArgMax{__shfl_xor_sync(0xffffffffu, best.v, o), __shfl_xor_sync(0xffffffffu, best.i, o)});
  double zs = 0, za = 0;
  for (int c = lane; c < chunks; c += 32) {
    if (p[c].zs == 0) continue;
    const double shift = double(p[c].best.v) - double(best.v), f = exp(shift);
    zs += f * p[c].zs, za += f * (p[c].za + shift * p[c].zs);
  }
  zs = warp_sum(zs), za = warp_sum(za);
  const bool none = best.i == 0x7fffffff;
  return {best, none ? NAN : float(log(zs) - za / zs)};
}

}  // namespace nibble::cuda::ops::detail

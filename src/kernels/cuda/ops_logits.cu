// Per-row statistics of FP32 logits: entropy and argmax (the ReSET signal, greedy decoding) and
// the token NLL (perplexity). The sums of exponentials are kept in FP64.
#include <algorithm>

#include "gemm_launch.cuh"
#include "nibble/cuda/ops.h"
#include "logits_partial.cuh"
#include "ops_common.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 1024;
constexpr int kChunkThreads = 256;

// Rows split in chunks so that few rows still fill the GPU: grid (chunks, rows).
int entropy_chunks(int B, int V) {
  const int for_sms = (2 * tc::sm_count() + B - 1) / B;
  return std::max(1, std::min({for_sms, 64, (V + 2047) / 2048}));
}

__global__ void __launch_bounds__(kChunkThreads)
    logit_partial_kernel(const float* logits, int V, int chunk, Partial* out, uint64_t* zero, int zero_per_row) {
  pdl_wait();
  pdl_trigger();
  __shared__ ArgMax s_arg[32];
  __shared__ double s_sum[32];
  if (zero)
    for (int i = blockIdx.x * kChunkThreads + threadIdx.x; i < zero_per_row; i += gridDim.x * kChunkThreads)
      zero[int64_t(blockIdx.y) * zero_per_row + i] = 0;
  const int c0 = blockIdx.x * chunk, n = max(0, min(chunk, V - c0));
  const float* z = logits + int64_t(blockIdx.y) * V + c0;
  ArgMax best{-INFINITY, 0x7fffffff};
  row_foreach(z, n, [&](int i, float v) { best = better(best, ArgMax{v, c0 + i}); });
  best = block_argmax(best, s_arg);
  double zs = 0, za = 0;
  if (best.v > -INFINITY) {  // else every entry is -inf or NaN: the chunk adds nothing
    row_foreach(z, n, [&](int, float v) {
      if (v == -INFINITY) return;
      const float a = v - best.v;
      const double e = expf(a);
      zs += e, za += e * a;
    });
  }
  zs = block_sum(zs, s_sum);
  za = block_sum(za, s_sum);
  if (threadIdx.x == 0) out[int64_t(blockIdx.y) * gridDim.x + blockIdx.x] = Partial{best, zs, za};
}

// One warp per row.
__global__ void entropy_combine_kernel(const Partial* parts, int chunks, float* entropy, int32_t* argmax) {
  pdl_wait();
  pdl_trigger();
  const RowStats r = combine_partials(parts + int64_t(blockIdx.x) * chunks, chunks);
  if (threadIdx.x != 0) return;
  if (argmax) argmax[blockIdx.x] = r.best.i == 0x7fffffff ? 0 : r.best.i;
  if (entropy) entropy[blockIdx.x] = r.entropy;
}

__global__ void __launch_bounds__(kThreads)
    token_nll_kernel(const float* logits, int V, const int32_t* target, float* nll) {
  __shared__ float s_max[32];
  __shared__ double s_sum[32];
  const float* z = logits + int64_t(blockIdx.x) * V;
  float m = -INFINITY;
  row_foreach(z, V, [&](int, float v) { m = fmaxf(m, v); });
  m = block_max(m, s_max);
  double s = 0;
  row_foreach(z, V, [&](int, float v) {
    if (v != -INFINITY) s += expf(v - m);
  });
  s = block_sum(s, s_sum);
  if (threadIdx.x == 0) {
    const int t = target[blockIdx.x];
    nll[blockIdx.x] = t < 0 || t >= V ? NAN : float(double(m) - double(z[t]) + log(s));
  }
}

void check_rows(const char* fn, int B, int V) {
  require(B >= 0 && B <= 0x7fffffff && V > 0, fn, "bad shape rows=" + std::to_string(B) + " V=" + std::to_string(V));
}

}  // namespace

// Enough for any row count up to B (a Batch sizes it for max_batch and calls with fewer rows):
// b * entropy_chunks(b) <= b * ceil(2 SMs / b) < 2 SMs + b.
size_t detail::logit_partials_capacity(int B) { return 2 * size_t(tc::sm_count()) + size_t(B); }

Chunking detail::logit_chunking(int B, int V) {
  const int chunks = entropy_chunks(B, V);
  return {chunks, ((V + chunks - 1) / chunks + 3) / 4 * 4};
}

void detail::launch_logit_partials(const float* logits, int B, int V, Chunking ch, Partial* parts, uint64_t* zero,
                                   int zero_per_row, cudaStream_t stream) {
  launch_pdl(logit_partial_kernel, dim3(unsigned(ch.chunks), unsigned(B)), kChunkThreads, 0, stream, logits, V, ch.len,
             parts, zero, zero_per_row);
}

size_t entropy_workspace_bytes(int B, int V) {
  check_rows("entropy_workspace_bytes", B, V);
  return logit_partials_capacity(B) * sizeof(Partial);
}

void logits_entropy_argmax(const float* logits, int B, int V, float* entropy, int32_t* argmax, void* workspace,
                           cudaStream_t stream) {
  const char* fn = "logits_entropy_argmax";
  check_rows(fn, B, V);
  require(B <= 65535, fn, "rows=" + std::to_string(B) + " above 65535");
  if (B == 0 || (!entropy && !argmax)) return;
  require_ptr(logits, fn, "logits"), require_ptr(workspace, fn, "workspace");
  auto* parts = static_cast<Partial*>(workspace);
  const Chunking ch = logit_chunking(B, V);
  launch_logit_partials(logits, B, V, ch, parts, nullptr, 0, stream);
  launch_pdl(entropy_combine_kernel, unsigned(B), 32, 0, stream, parts, ch.chunks, entropy, argmax);
  check_launch(fn);
}

void token_nll(const float* logits, int T, int V, const int32_t* target, float* nll, cudaStream_t stream) {
  const char* fn = "token_nll";
  check_rows(fn, T, V);
  if (T == 0) return;
  require_ptr(logits, fn, "logits"), require_ptr(target, fn, "target"), require_ptr(nll, fn, "nll");
  token_nll_kernel<<<T, kThreads, 0, stream>>>(logits, V, target, nll);
  check_launch(fn);
}

}  // namespace nibble::cuda::ops

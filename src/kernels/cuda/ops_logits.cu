// Per-row statistics of FP32 logits: entropy and argmax (the ReSET signal, greedy decoding) and
// the token NLL (perplexity). One CTA per row; the sums of exponentials are kept in FP64.
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 1024;

// The row's maximum and its lowest index (NaN never wins; index -1 if every entry is NaN).
__device__ ArgMax row_argmax(const float* z, int V, ArgMax* scratch) {
  ArgMax a{-INFINITY, 0x7fffffff};
  row_foreach(z, V, [&](int i, float v) { a = better(a, ArgMax{v, i}); });
  a = block_argmax(a, scratch);
  if (a.i == 0x7fffffff) a.i = -1;
  return a;
}

__global__ void __launch_bounds__(kThreads)
    entropy_argmax_kernel(const float* logits, int V, float* entropy, int32_t* argmax) {
  __shared__ ArgMax s_arg[32];
  __shared__ double s_sum[32];
  const float* z = logits + int64_t(blockIdx.x) * V;
  const ArgMax best = row_argmax(z, V, s_arg);
  if (argmax && threadIdx.x == 0) argmax[blockIdx.x] = best.i < 0 ? 0 : best.i;
  if (!entropy) return;
  // H = log Z - sum(e^a a) / Z, a = z - max; -inf logits add nothing.
  double zs = 0, za = 0;
  row_foreach(z, V, [&](int, float v) {
    if (v == -INFINITY) return;
    const float a = v - best.v;
    const double e = expf(a);
    zs += e, za += e * a;
  });
  zs = block_sum(zs, s_sum);
  za = block_sum(za, s_sum);
  if (threadIdx.x == 0) entropy[blockIdx.x] = best.i < 0 ? NAN : float(log(zs) - za / zs);
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

void logits_entropy_argmax(const float* logits, int B, int V, float* entropy, int32_t* argmax,
                           cudaStream_t stream) {
  const char* fn = "logits_entropy_argmax";
  check_rows(fn, B, V);
  if (B == 0 || (!entropy && !argmax)) return;
  require_ptr(logits, fn, "logits");
  entropy_argmax_kernel<<<B, kThreads, 0, stream>>>(logits, V, entropy, argmax);
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

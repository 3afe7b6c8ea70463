// Per-row statistics of FP32 logits: entropy and argmax (the ReSET signal, greedy decoding) and
// the token NLL (perplexity). The sums of exponentials are kept in FP64.
#include <algorithm>

#include "gemm_launch.cuh"
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 1024;

// A chunk's statistics relative to its own max m: Z = sum e^(z - m), A = sum e^(z - m) (z - m).
struct Partial {
  ArgMax best;
  double zs, za;
};

constexpr int kChunkThreads = 256;

// Rows split in chunks so that few rows still fill the GPU: grid (chunks, rows).
int entropy_chunks(int B, int V) {
  const int for_sms = (2 * tc::sm_count() + B - 1) / B;
  return std::max(1, std::min({for_sms, 64, (V + 2047) / 2048}));
}

__global__ void __launch_bounds__(kChunkThreads)
    entropy_partial_kernel(const float* logits, int V, int chunk, Partial* out) {
  pdl_wait();
  pdl_trigger();
  __shared__ ArgMax s_arg[32];
  __shared__ double s_sum[32];
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

// One warp per row: the chunks' partials rebased to the row's max M; H = log Z - A / Z.
__global__ void entropy_combine_kernel(const Partial* parts, int chunks, float* entropy, int32_t* argmax) {
  pdl_wait();
  pdl_trigger();
  const Partial* p = parts + int64_t(blockIdx.x) * chunks;
  ArgMax best{-INFINITY, 0x7fffffff};
  for (int c = threadIdx.x; c < chunks; c += 32) best = better(best, p[c].best);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    best = better(best, ArgMax{__shfl_xor_sync(0xffffffffu, best.v, o), __shfl_xor_sync(0xffffffffu, best.i, o)});
  double zs = 0, za = 0;
  for (int c = threadIdx.x; c < chunks; c += 32) {
    if (p[c].zs == 0) continue;
    const double shift = double(p[c].best.v) - double(best.v), f = exp(shift);
    zs += f * p[c].zs, za += f * (p[c].za + shift * p[c].zs);
  }
  zs = warp_sum(zs), za = warp_sum(za);
  if (threadIdx.x != 0) return;
  const bool none = best.i == 0x7fffffff;
  if (argmax) argmax[blockIdx.x] = none ? 0 : best.i;
  if (entropy) entropy[blockIdx.x] = none ? NAN : float(log(zs) - za / zs);
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

__global__ void entropy_temperature_kernel(const float* entropy, const double* threshold, const float* t_low,
                                           const float* t_high, int B, float* temperature) {
  pdl_wait();
  pdl_trigger();
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < B) temperature[b] = double(entropy[b]) >= threshold[b] ? t_high[b] : t_low[b];
}

void check_rows(const char* fn, int B, int V) {
  require(B >= 0 && B <= 0x7fffffff && V > 0, fn, "bad shape rows=" + std::to_string(B) + " V=" + std::to_string(V));
}

}  // namespace

// Enough for any row count up to B (a Batch sizes it for max_batch and calls with fewer rows):
// b * entropy_chunks(b) <= b * ceil(2 SMs / b) < 2 SMs + b.
size_t entropy_workspace_bytes(int B, int V) {
  check_rows("entropy_workspace_bytes", B, V);
  return (2 * size_t(tc::sm_count()) + size_t(B)) * sizeof(Partial);
}

void logits_entropy_argmax(const float* logits, int B, int V, float* entropy, int32_t* argmax, void* workspace,
                           cudaStream_t stream) {
  const char* fn = "logits_entropy_argmax";
  check_rows(fn, B, V);
  require(B <= 65535, fn, "rows=" + std::to_string(B) + " above 65535");
  if (B == 0 || (!entropy && !argmax)) return;
  require_ptr(logits, fn, "logits"), require_ptr(workspace, fn, "workspace");
  const int chunks = entropy_chunks(B, V);
  const int chunk = ((V + chunks - 1) / chunks + 3) / 4 * 4;  // a multiple of 4: float4 loads stay aligned
  auto* parts = static_cast<Partial*>(workspace);
  launch_pdl(entropy_partial_kernel, dim3(unsigned(chunks), unsigned(B)), kChunkThreads, 0, stream, logits, V, chunk,
             parts);
  launch_pdl(entropy_combine_kernel, unsigned(B), 32, 0, stream, parts, chunks, entropy, argmax);
  check_launch(fn);
}

void entropy_temperature(const float* entropy, const double* threshold, const float* t_low, const float* t_high,
                         int B, float* temperature, cudaStream_t stream) {
  const char* fn = "entropy_temperature";
  require(B >= 0, fn, "rows=" + std::to_string(B));
  if (B == 0) return;
  require_ptr(entropy, fn, "entropy"), require_ptr(threshold, fn, "threshold"), require_ptr(t_low, fn, "t_low");
  require_ptr(t_high, fn, "t_high"), require_ptr(temperature, fn, "temperature");
  launch_pdl(entropy_temperature_kernel, unsigned((B + 255) / 256), 256, 0, stream, entropy, threshold, t_low, t_high,
             B, temperature);
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

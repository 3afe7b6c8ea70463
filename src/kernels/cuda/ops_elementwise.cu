// Element-wise ops of the model runtime: embedding lookup, bias add, SwiGLU, fp16 -> fp32.
#include <algorithm>

#include "nibble/cuda/ops.h"
#include "ops_common.cuh"
#include "rope_pairs.h"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 256;

int grid_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 8)); }

__global__ void embed_kernel(const uint16_t* table, const int32_t* ids, int H, float* x) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x;
  const uint16_t* row = table + int64_t(ids[t]) * H;
  float* out = x + int64_t(t) * H;
  for (int i = threadIdx.x; i < H; i += blockDim.x) out[i] = h2f(row[i]);
}

__global__ void add_bias_kernel(uint16_t* y, const float* bias, int64_t n, int N) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = f2h(h2f(y[i]) + bias[i % N]);
}

__global__ void silu_mul_kernel(const uint16_t* gate, const uint16_t* up, int64_t n, uint16_t* out) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = h2f(gate[i]);
    out[i] = f2h(g / (1.0f + __expf(-g)) * h2f(up[i]));
  }
}

// Element j of out is pair j of gate_up (gate at 2j, up at 2j + 1: rows of [T, 2I] run on).
__global__ void silu_mul_pairs_kernel(const uint16_t* gate_up, int64_t n, uint16_t* out) {
  pdl_wait();
  pdl_trigger();
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    const float g = h2f(gate_up[2 * j]);
    out[j] = f2h(g / (1.0f + __expf(-g)) * h2f(gate_up[2 * j + 1]));
  }
}

__global__ void split_columns_kernel(const uint16_t* src, int64_t n, int n0, int n1, int n2, uint16_t* d0,
                                     uint16_t* d1, uint16_t* d2, int pair_d) {
  pdl_wait();
  pdl_trigger();
  const int N = n0 + n1 + n2;
  auto in_place = [pair_d](int c) {
    return pair_d == 0 ? c : c - c % pair_d + cuda::detail::rope_pair_source(c % pair_d, pair_d);
  };
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = j / N;
    const int c = int(j % N);
    if (c < n0) d0[t * n0 + in_place(c)] = src[j];
    else if (c < n0 + n1) d1[t * n1 + in_place(c - n0)] = src[j];
    else d2[t * n2 + (c - n0 - n1)] = src[j];
  }
}

__global__ void half_to_float_kernel(const uint16_t* x, int64_t n, float* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = h2f(x[i]);
}

}  // namespace

void embed(const uint16_t* table, const int32_t* ids, int T, int H, float* x, cudaStream_t stream) {
  require(T >= 0 && H > 0, "embed", "bad shape T=" + std::to_string(T) + " H=" + std::to_string(H));
  if (T == 0) return;
  require_ptr(table, "embed", "table"), require_ptr(ids, "embed", "ids"), require_ptr(x, "embed", "x");
  launch_pdl(embed_kernel, T, kThreads, 0, stream, table, ids, H, x);
  check_launch("embed");
}

void add_bias(uint16_t* y, const float* bias, int T, int N, cudaStream_t stream) {
  require(T >= 0 && N > 0, "add_bias", "bad shape T=" + std::to_string(T) + " N=" + std::to_string(N));
  if (T == 0) return;
  require_ptr(y, "add_bias", "y"), require_ptr(bias, "add_bias", "bias");
  const int64_t n = int64_t(T) * N;
  launch_pdl(add_bias_kernel, grid_for(n), kThreads, 0, stream, y, bias, n, N);
  check_launch("add_bias");
}

void silu_mul(const uint16_t* gate, const uint16_t* up, int64_t n, uint16_t* out, cudaStream_t stream) {
  require(n >= 0, "silu_mul", "negative size " + std::to_string(n));
  if (n == 0) return;
  require_ptr(gate, "silu_mul", "gate"), require_ptr(up, "silu_mul", "up"), require_ptr(out, "silu_mul", "out");
  launch_pdl(silu_mul_kernel, grid_for(n), kThreads, 0, stream, gate, up, n, out);
  check_launch("silu_mul");
}

void silu_mul_pairs(const uint16_t* gate_up, int T, int I, uint16_t* out, cudaStream_t stream) {
  require(T >= 0 && I > 0, "silu_mul_pairs", "bad shape T=" + std::to_string(T) + " I=" + std::to_string(I));
  if (T == 0) return;
  require_ptr(gate_up, "silu_mul_pairs", "gate_up"), require_ptr(out, "silu_mul_pairs", "out");
  const int64_t n = int64_t(T) * I;
  launch_pdl(silu_mul_pairs_kernel, grid_for(n), kThreads, 0, stream, gate_up, n, out);
  check_launch("silu_mul_pairs");
}

void split_columns(const uint16_t* src, int T, int n0, int n1, int n2, uint16_t* d0, uint16_t* d1, uint16_t* d2,
                   cudaStream_t stream, int pair_d) {
  const char* fn = "split_columns";
  require(T >= 0 && n0 > 0 && n1 > 0 && n2 >= 0, fn,
          "bad shape T=" + std::to_string(T) + " n=" + std::to_string(n0) + "/" + std::to_string(n1) + "/" +
              std::to_string(n2));
  require(pair_d == 0 || (pair_d > 0 && pair_d % 2 == 0 && n0 % pair_d == 0 && n1 % pair_d == 0), fn,
          "pair_d=" + std::to_string(pair_d) + " must be 0 or an even divisor of n0 and n1");
  if (T == 0) return;
  require_ptr(src, fn, "src"), require_ptr(d0, fn, "d0"), require_ptr(d1, fn, "d1");
  require(n2 == 0 || d2, fn, "d2 is null while n2 > 0");
  const int64_t n = int64_t(T) * (n0 + n1 + n2);
  launch_pdl(split_columns_kernel, grid_for(n), kThreads, 0, stream, src, n, n0, n1, n2, d0, d1, d2, pair_d);
  check_launch(fn);
}

void half_to_float(const uint16_t* x, int64_t n, float* y, cudaStream_t stream) {
  require(n >= 0, "half_to_float", "negative size " + std::to_string(n));
  if (n == 0) return;
  require_ptr(x, "half_to_float", "x"), require_ptr(y, "half_to_float", "y");
  half_to_float_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, y);
  check_launch("half_to_float");
}

}  // namespace nibble::cuda::ops

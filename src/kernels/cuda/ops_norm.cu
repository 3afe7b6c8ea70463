// RMSNorm of the FP32 residual stream into FP16, alone or fused with the residual add.
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 1024;
constexpr int kMaxPerThread = 16;  // H <= 16384: a row lives in registers, read once

// One CTA per row, each thread holding its H / 1024 elements in registers, so all of a row's loads
// are in flight at once (a row-sized strided loop would wait for each load in turn: 13 us for a
// 4096-wide row at one token, against ~3 us). With delta: x += float(delta) first (written back).
// With y: y = fp16(norm * w).
//
// With delta, x and w load before griddepcontrol.wait, while the kernel before (the GEMV that
// writes delta) ends: w is constant, and x was last written at least two kernels back, which has
// completed once this kernel runs (every kernel of a step waits before it triggers its dependents).
// Without delta, x comes from the kernel just before (the embedding).
template <int PER>
__global__ void __launch_bounds__(kThreads)
    add_rmsnorm_kernel(float* x, const uint16_t* delta, const float* w, int H, float eps, uint16_t* y) {
  __shared__ float scratch[32];
  float* xr = x + int64_t(blockIdx.x) * H;
  const uint16_t* dr = delta ? delta + int64_t(blockIdx.x) * H : nullptr;
  float v[PER], wv[PER];
  auto load_x_w = [&] {
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int i = threadIdx.x + j * kThreads;
      v[j] = i < H ? xr[i] : 0.0f;
      wv[j] = y && i < H ? w[i] : 0.0f;
    }
  };
  if (dr) load_x_w();
  pdl_wait();
  pdl_trigger();
  if (!dr) load_x_w();
  float ss = 0;
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i < H && dr) v[j] += h2f(__ldcg(dr + i));
  }
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i < H && dr) xr[i] = v[j];
    ss += v[j] * v[j];
  }
  if (!y) return;
  ss = block_sum(ss, scratch);
  const float r = rsqrtf(ss / float(H) + eps);
  uint16_t* yr = y + int64_t(blockIdx.x) * H;
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i < H) yr[i] = f2h(wv[j] * (v[j] * r));
  }
}

void launch(int T, float* x, const uint16_t* delta, const float* w, int H, float eps, uint16_t* y,
            cudaStream_t stream) {
  const int per = (H + kThreads - 1) / kThreads;
  const int threads = per == 1 ? (H + 31) / 32 * 32 : kThreads;
  auto go = [&](auto kernel) { launch_pdl(kernel, T, threads, 0, stream, x, delta, w, H, eps, y); };
  if (per <= 1) go(add_rmsnorm_kernel<1>);
  else if (per <= 2) go(add_rmsnorm_kernel<2>);
  else if (per <= 4) go(add_rmsnorm_kernel<4>);
  else if (per <= 8) go(add_rmsnorm_kernel<8>);
  else go(add_rmsnorm_kernel<16>);
}

void check_shape(const char* fn, int T, int H, float eps) {
  require(T >= 0 && H > 0, fn, "bad shape T=" + std::to_string(T) + " H=" + std::to_string(H));
  require(eps >= 0, fn, "eps must be >= 0");
  require(H <= kThreads * kMaxPerThread, fn,
          "hidden size H=" + std::to_string(H) + " is above the " + std::to_string(kThreads * kMaxPerThread) +
              " this kernel holds in registers");
}

}  // namespace

void rmsnorm(const float* x, const float* w, int T, int H, float eps, uint16_t* y, cudaStream_t stream) {
  check_shape("rmsnorm", T, H, eps);
  if (T == 0) return;
  require_ptr(x, "rmsnorm", "x"), require_ptr(w, "rmsnorm", "w"), require_ptr(y, "rmsnorm", "y");
  launch(T, const_cast<float*>(x), nullptr, w, H, eps, y, stream);
  check_launch("rmsnorm");
}

void add_rmsnorm(float* x, const uint16_t* delta, const float* w, int T, int H, float eps, uint16_t* y,
                 cudaStream_t stream) {
  check_shape("add_rmsnorm", T, H, eps);
  if (T == 0) return;
  require_ptr(x, "add_rmsnorm", "x"), require_ptr(delta, "add_rmsnorm", "delta");
  require(!y || w, "add_rmsnorm", "w is null while y is not");
  launch(T, x, delta, w, H, eps, y, stream);
  check_launch("add_rmsnorm");
}

}  // namespace nibble::cuda::ops

// RMSNorm of the FP32 residual stream into FP16, alone or fused with the residual add.
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 256;

// One CTA per row. With delta: x += float(delta) first (written back). With y: y = fp16(norm * w).
__global__ void __launch_bounds__(kThreads)
    add_rmsnorm_kernel(float* x, const uint16_t* delta, const float* w, int H, float eps, uint16_t* y) {
  __shared__ float scratch[32];
  float* xr = x + int64_t(blockIdx.x) * H;
  float ss = 0;
  for (int i = threadIdx.x; i < H; i += kThreads) {
    float v = xr[i];
    if (delta) xr[i] = v = v + h2f(delta[int64_t(blockIdx.x) * H + i]);
    ss += v * v;
  }
  if (!y) return;
  ss = block_sum(ss, scratch);
  const float r = rsqrtf(ss / float(H) + eps);
  uint16_t* yr = y + int64_t(blockIdx.x) * H;
  for (int i = threadIdx.x; i < H; i += kThreads) yr[i] = f2h(w[i] * (xr[i] * r));  // this thread's own x
}

void check_shape(const char* fn, int T, int H, float eps) {
  require(T >= 0 && H > 0, fn, "bad shape T=" + std::to_string(T) + " H=" + std::to_string(H));
  require(eps >= 0, fn, "eps must be >= 0");
}

}  // namespace

void rmsnorm(const float* x, const float* w, int T, int H, float eps, uint16_t* y, cudaStream_t stream) {
  check_shape("rmsnorm", T, H, eps);
  if (T == 0) return;
  require_ptr(x, "rmsnorm", "x"), require_ptr(w, "rmsnorm", "w"), require_ptr(y, "rmsnorm", "y");
  add_rmsnorm_kernel<<<T, kThreads, 0, stream>>>(const_cast<float*>(x), nullptr, w, H, eps, y);
  check_launch("rmsnorm");
}

void add_rmsnorm(float* x, const uint16_t* delta, const float* w, int T, int H, float eps, uint16_t* y,
                 cudaStream_t stream) {
  check_shape("add_rmsnorm", T, H, eps);
  if (T == 0) return;
  require_ptr(x, "add_rmsnorm", "x"), require_ptr(delta, "add_rmsnorm", "delta");
  require(!y || w, "add_rmsnorm", "w is null while y is not");
  add_rmsnorm_kernel<<<T, kThreads, 0, stream>>>(x, delta, w, H, eps, y);
  check_launch("add_rmsnorm");
}

}  // namespace nibble::cuda::ops

// RMSNorm of the FP32 residual stream into FP16, alone or fused with the residual add.
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"
#include "rmsnorm_row.cuh"

namespace nibble::cuda::ops {
using namespace detail;
namespace norm = cuda::detail;  // rmsnorm_row.cuh

namespace {

// One CTA per row, each thread one virtual thread of rmsnorm_row.cuh's order holding its H / 1024
// elements in registers, so all of a row's loads are in flight at once (a row-sized strided loop
// would wait for each load in turn: 13 us for a 4096-wide row at one token, against ~3 us).
// With delta (and delta2): v = x + float(delta) (+ float(delta2), in that order); written back to x
// unless keep_x. With y: y = fp16(norm(v) * w).
//
// With delta, x and w load before griddepcontrol.wait, while the kernel before (the GEMV that
// writes delta) ends: w is constant, and x was last written at least two kernels back, which has
// completed once this kernel runs (every kernel of a step waits before it triggers its dependents).
// Without delta, x comes from the kernel just before (the embedding).
template <int PER>
__global__ void __launch_bounds__(norm::kNormThreads)
    add_rmsnorm_kernel(float* x, const uint16_t* delta, const uint16_t* delta2, bool keep_x, const float* w, int H,
                       float eps, uint16_t* y) {
  __shared__ float scratch[32];
  float* xr = x + int64_t(blockIdx.x) * H;
  const int64_t row = int64_t(blockIdx.x) * H;
  float v[PER], wv[PER];
  auto load_x_w = [&] {
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int i = threadIdx.x + j * norm::kNormThreads;
      v[j] = i < H ? xr[i] : 0.0f;
      wv[j] = y && i < H ? w[i] : 0.0f;
    }
  };
  if (delta) load_x_w();
  pdl_wait();
  pdl_trigger();
  if (!delta) load_x_w();
  float ss = 0;
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = threadIdx.x + j * norm::kNormThreads;
    if (i < H && delta) v[j] += h2f(__ldcg(delta + row + i));
    if (i < H && delta2) v[j] += h2f(__ldcg(delta2 + row + i));
  }
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = threadIdx.x + j * norm::kNormThreads;
    if (i < H && delta && !keep_x) xr[i] = v[j];
    ss = fmaf(v[j], v[j], ss);
  }
  if (!y) return;
  norm::norm_group_sum(ss, threadIdx.x >> 5, true, scratch);
  __syncthreads();
  const float r = norm::norm_factor(norm::norm_total(scratch, H), H, eps);
  uint16_t* yr = y + row;
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = threadIdx.x + j * norm::kNormThreads;
    if (i < H) yr[i] = __half_as_ushort(norm::norm_out(wv[j], v[j], r));
  }
}

void launch(int T, float* x, const uint16_t* delta, const uint16_t* delta2, bool keep_x, const float* w, int H,
            float eps, uint16_t* y, cudaStream_t stream) {
  const int per = norm::norm_per_thread(H), threads = norm::norm_virtual_threads(H);
  auto go = [&](auto kernel) { launch_pdl(kernel, T, threads, 0, stream, x, delta, delta2, keep_x, w, H, eps, y); };
  if (per <= 1) go(add_rmsnorm_kernel<1>);
  else if (per <= 2) go(add_rmsnorm_kernel<2>);
  else if (per <= 4) go(add_rmsnorm_kernel<4>);
  else if (per <= 8) go(add_rmsnorm_kernel<8>);
  else go(add_rmsnorm_kernel<16>);
}

void check_shape(const char* fn, int T, int H, float eps) {
  require(T >= 0 && H > 0, fn, "bad shape T=" + std::to_string(T) + " H=" + std::to_string(H));
  require(eps >= 0, fn, "eps must be >= 0");
  constexpr int kMaxH = norm::kNormThreads * norm::kNormMaxPerThread;
  require(H <= kMaxH, fn,
          "hidden size H=" + std::to_string(H) + " is above the " + std::to_string(kMaxH) +
              " this kernel holds in registers");
}

}  // namespace

void rmsnorm(const float* x, const float* w, int T, int H, float eps, uint16_t* y, cudaStream_t stream) {
  check_shape("rmsnorm", T, H, eps);
  if (T == 0) return;
  require_ptr(x, "rmsnorm", "x"), require_ptr(w, "rmsnorm", "w"), require_ptr(y, "rmsnorm", "y");
  launch(T, const_cast<float*>(x), nullptr, nullptr, true, w, H, eps, y, stream);
  check_launch("rmsnorm");
}

void add_rmsnorm(float* x, const uint16_t* delta, const float* w, int T, int H, float eps, uint16_t* y,
                 cudaStream_t stream, const uint16_t* delta2) {
  check_shape("add_rmsnorm", T, H, eps);
  if (T == 0) return;
  require_ptr(x, "add_rmsnorm", "x"), require_ptr(delta, "add_rmsnorm", "delta");
  require(!y || w, "add_rmsnorm", "w is null while y is not");
  launch(T, x, delta, delta2, false, w, H, eps, y, stream);
  check_launch("add_rmsnorm");
}

void rmsnorm_of_sum(const float* x, const uint16_t* delta, const float* w, int T, int H, float eps, uint16_t* y,
                    cudaStream_t stream) {
  check_shape("rmsnorm_of_sum", T, H, eps);
  if (T == 0) return;
  require_ptr(x, "rmsnorm_of_sum", "x"), require_ptr(delta, "rmsnorm_of_sum", "delta");
  require_ptr(w, "rmsnorm_of_sum", "w"), require_ptr(y, "rmsnorm_of_sum", "y");
  launch(T, const_cast<float*>(x), delta, nullptr, true, w, H, eps, y, stream);
  check_launch("rmsnorm_of_sum");
}

}  // namespace nibble::cuda::ops

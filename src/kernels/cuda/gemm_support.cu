// Shared pieces of the GEMM kernels: the workspace, the split-K reduction, the SM count, and the
// device memory of GemmWeight.
#include <cuda_fp16.h>

#include <utility>

#include "gemm_launch.cuh"
#include "nibble/cuda/check.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"

namespace nibble::cuda {

GemmWorkspace::~GemmWorkspace() {
  for (void* p : p_) cudaFree(p);
}

void* GemmWorkspace::get(size_t bytes, int slot) {
  if (slot < 0 || slot > 2) throw Error("GemmWorkspace::get: slot must be 0, 1 or 2");
  if (bytes > n_[slot]) {
    NIBBLE_CUDA_CHECK(cudaFree(p_[slot]));  // synchronizes: no launch still reads the old buffer
    p_[slot] = nullptr, n_[slot] = 0;
    NIBBLE_CUDA_CHECK(cudaMalloc(&p_[slot], bytes));
    n_[slot] = bytes;
  }
  return p_[slot];
}

GemmWeight::GemmWeight(GemmWeight&& o) noexcept { *this = std::move(o); }

GemmWeight& GemmWeight::operator=(GemmWeight&& o) noexcept {
  if (this != &o) {
    release();
    format = std::move(o.format);
    N = o.N, K = o.K, block = o.block, global_scale = o.global_scale;
    codes = std::exchange(o.codes, nullptr), meta = std::exchange(o.meta, nullptr);
    codes_bytes = std::exchange(o.codes_bytes, 0), meta_bytes = std::exchange(o.meta_bytes, 0);
  }
  return *this;
}

GemmWeight::~GemmWeight() { release(); }

void GemmWeight::release() noexcept {
  cudaFree(codes), cudaFree(meta);
  codes = meta = nullptr;
  codes_bytes = meta_bytes = 0;
}

namespace tc {

namespace {
__global__ void splitk_reduce_kernel(const float* partial, int splits, int M, int N, const float* row_scale,
                                     float alpha, uint16_t* y) {
  const int64_t total = int64_t(M) * N / 2;  // N is even: two outputs per thread
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t idx = 2 * i;
    const int m = int(idx / N);
    float2 s = make_float2(0.f, 0.f);
    for (int k = 0; k < splits; ++k) {
      float2 v = *reinterpret_cast<const float2*>(partial + int64_t(k) * M * N + idx);
      s.x += v.x, s.y += v.y;
    }
    const float f = alpha * (row_scale ? row_scale[m] : 1.0f);
    *reinterpret_cast<__half2*>(y + idx) = __floats2half2_rn(s.x * f, s.y * f);
  }
}
}  // namespace

void splitk_reduce(const float* partial, int splits, int M, int N, const float* row_scale, float alpha, uint16_t* y,
                   cudaStream_t stream) {
  const int64_t pairs = int64_t(M) * N / 2;
  const int blocks = int(std::min<int64_t>((pairs + 255) / 256, 8 * sm_count()));
  splitk_reduce_kernel<<<blocks, 256, 0, stream>>>(partial, splits, M, N, row_scale, alpha, y);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

int compute_capability() {
  static const int cc = [] {
    int dev = 0, major = 0, minor = 0;
    NIBBLE_CUDA_CHECK(cudaGetDevice(&dev));
    NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    return major * 10 + minor;
  }();
  return cc;
}

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    NIBBLE_CUDA_CHECK(cudaGetDevice(&dev));
    NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

}  // namespace tc
}  // namespace nibble::cuda

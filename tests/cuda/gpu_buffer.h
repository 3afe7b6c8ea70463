#pragma once
// A device buffer for the GPU tests: RAII, host copies in and out.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "nibble/cuda/check.h"

namespace nibble::cuda::test {

template <class T>
class GpuBuffer {
 public:
  explicit GpuBuffer(size_t n) : n_(n) { NIBBLE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T))); }
  explicit GpuBuffer(const std::vector<T>& host) : GpuBuffer(host.size()) {
    NIBBLE_CUDA_CHECK(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~GpuBuffer() { cudaFree(p_); }
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;
  T* get() const { return p_; }
  // Fills every byte with 0xFF: an fp16 NaN in every element, so unwritten outputs show.
  void poison() { NIBBLE_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(T))); }
  void zero() { NIBBLE_CUDA_CHECK(cudaMemset(p_, 0, n_ * sizeof(T))); }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    NIBBLE_CUDA_CHECK(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace nibble::cuda::test

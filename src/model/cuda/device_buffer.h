#pragma once
// A typed device allocation (cudaMalloc) that frees itself; movable, not copyable. The runtime's
// weights, KV cache and scratch are all held in these.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "nibble/cuda/check.h"

namespace nibble::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n) NIBBLE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (n_) NIBBLE_CUDA_CHECK(cudaMemcpy(p_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  bool empty() const { return n_ == 0; }

 private:
  void release() noexcept {
    if (p_) cudaFree(p_);
    p_ = nullptr;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Page-locked host memory (cudaMallocHost), so copies from it are truly asynchronous.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t n) : n_(n) {
    if (n) NIBBLE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      if (p_) cudaFreeHost(p_);
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace nibble::cuda

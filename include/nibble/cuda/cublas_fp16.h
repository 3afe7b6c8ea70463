#pragma once
// The FP16 reference point: Y[M, N] = X[M, K] · W[N, K]^T through cuBLAS (tensor cores, FP32
// accumulation), all row-major fp16 on the device.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nibble::cuda {

class CublasFp16 {
 public:
  CublasFp16();  // throws nibble::Error if cuBLAS cannot start
  ~CublasFp16();
  CublasFp16(const CublasFp16&) = delete;
  CublasFp16& operator=(const CublasFp16&) = delete;

  void gemm(const uint16_t* x, const uint16_t* w, uint16_t* y, int M, int N, int K, cudaStream_t stream);
  // The same product with an FP32 output (an FP16 output layer's logits).
  void gemm_f32out(const uint16_t* x, const uint16_t* w, float* y, int M, int N, int K, cudaStream_t stream);

 private:
  void* handle_ = nullptr;
};

}  // namespace nibble::cuda

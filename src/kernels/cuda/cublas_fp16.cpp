#include "nibble/cuda/cublas_fp16.h"

#include <cublas_v2.h>

#include <string>

#include "nibble/error.h"

namespace nibble::cuda {
namespace {
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cuBLAS ") + what + ": status " + std::to_string(int(s)));
}
}  // namespace

CublasFp16::CublasFp16() {
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  handle_ = h;
}

CublasFp16::~CublasFp16() {
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

// Column-major view: Y^T [N, M] = W [N, K] (stored K x N, transposed) · X^T [K, M]; fp16 inputs,
// FP32 accumulation, output of type `out` (fp16 or FP32).
static void gemm_ex(void* handle, const uint16_t* x, const uint16_t* w, void* y, cudaDataType out, int M, int N,
                    int K, cudaStream_t stream, const char* what) {
  auto h = static_cast<cublasHandle_t>(handle);
  check(cublasSetStream(h, stream), "cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w, CUDA_R_16F, K, x, CUDA_R_16F, K, &beta, y, out,
                     N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        what);
}

void CublasFp16::gemm(const uint16_t* x, const uint16_t* w, uint16_t* y, int M, int N, int K, cudaStream_t stream) {
  gemm_ex(handle_, x, w, y, CUDA_R_16F, M, N, K, stream, "cublasGemmEx");
}

void CublasFp16::gemm_f32out(const uint16_t* x, const uint16_t* w, float* y, int M, int N, int K,
                             cudaStream_t stream) {
  gemm_ex(handle_, x, w, y, CUDA_R_32F, M, N, K, stream, "cublasGemmEx (FP32 output)");
}

}  // namespace nibble::cuda

// cuBLASLt FP8 reference point for the GEMM benchmarks: e4m3 x e4m3 -> fp16, FP32 accumulation.
// Row-major Y[M, N] = X[M, K] · W[N, K]^T is column-major Y^T = W · X^T, i.e. the "TN" layout
// (A = W transposed, B = X) that cuBLASLt requires for FP8.
#include <cublasLt.h>

#include <string>

#include "nibble/cuda/check.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cuBLASLt FP8: ") + what + " failed (status " + std::to_string(int(s)) + ")");
}

// Owns the descriptors of one call; destroyed on every path.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

CublasLtFp8::CublasLtFp8() {
  cublasLtHandle_t h = nullptr;
  check(cublasLtCreate(&h), "cublasLtCreate");
  handle_ = h;
  workspace_bytes_ = size_t(32) << 20;
  NIBBLE_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

CublasLtFp8::~CublasLtFp8() {
  cudaFree(workspace_);
  cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

void CublasLtFp8::gemm(const uint8_t* x8, const uint8_t* w8, uint16_t* y, int M, int N, int K, float alpha,
                       cudaStream_t stream) {
  Descs d;
  check(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  check(cublasLtMatrixLayoutCreate(&d.a, CUDA_R_8F_E4M3, K, N, K), "layout A");
  check(cublasLtMatrixLayoutCreate(&d.b, CUDA_R_8F_E4M3, K, M, K), "layout B");
  check(cublasLtMatrixLayoutCreate(&d.c, CUDA_R_16F, N, M, N), "layout C");
  check(cublasLtMatmulPreferenceCreate(&d.pref), "PreferenceCreate");
  check(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                             sizeof workspace_bytes_),
        "workspace preference");
  auto h = static_cast<cublasLtHandle_t>(handle_);
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(h, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &heur, &found), "AlgoGetHeuristic");
  if (found == 0) throw Error("cuBLASLt FP8: no algorithm for M=" + std::to_string(M) + " N=" + std::to_string(N) +
                              " K=" + std::to_string(K));
  const float beta = 0.0f;
  check(cublasLtMatmul(h, d.op, &alpha, w8, d.a, x8, d.b, &beta, y, d.c, y, d.c, &heur.algo, workspace_,
                       workspace_bytes_, stream),
        "cublasLtMatmul");
}

}  // namespace nibble::cuda

// cuBLASLt FP8 GEMMs: e4m3 x e4m3, FP32 accumulation, fp16 (or FP32) output. Row-major
// Y[M, N] = X[M, K] · W[N, K]^T is column-major Y^T = W · X^T, i.e. the "TN" layout (A = W
// transposed, B = X) that cuBLASLt requires for FP8. In that view our per-token scale is a scale
// per column of B: the outer-vector scale of B (A's is a vector of ones).
//
// Algorithms: cuBLASLt's heuristic offers several per shape and its first is often not the
// fastest (measured on the H100 for the outer-vector-scaled kernels), so the first call of a
// shape times up to kCandidates of them on the call's own buffers and keeps the fastest, for all
// M in the same power-of-two bucket (checked with cublasLtMatmulAlgoCheck for each new M).
#include <cublasLt.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "nestedfp8_lt.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

constexpr int kCandidates = 8;

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cuBLASLt FP8: ") + what + " failed (status " + std::to_string(int(s)) + ")");
}

std::string shape_text(int M, int N, int K) {
  return "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
}

// kPlain: alpha only, fp16 out; kEpilogue: outer-vector scales, fp16 out; kFp32: FP32 out.
enum class Path { kPlain, kEpilogue, kFp32 };
using Key = std::tuple<int, int, int, Path>;

// The descriptors of one (shape, path), the heuristic's candidate algorithms (none: cuBLASLt has
// no kernel for it; only tolerated for kEpilogue) and, after the first call, the chosen one.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulAlgo_t> candidates;
  cublasLtMatmulAlgo_t algo{};
  bool chosen = false;
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

void set_scale_pointers(Plan& p, const float* col_ones, const float* row_scale) {
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &col_ones, sizeof col_ones),
        "A_SCALE_POINTER");
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &row_scale, sizeof row_scale),
        "B_SCALE_POINTER");
}

// Builds the descriptors and asks the heuristic; for kEpilogue the scale pointers must be valid
// device vectors (N and M floats).
std::unique_ptr<Plan> make_plan(cublasLtHandle_t h, size_t workspace_bytes, int M, int N, int K, Path path,
                                const float* col_ones, const float* row_scale) {
  auto p = std::make_unique<Plan>();
  check(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  if (path == Path::kEpilogue) {
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    if (cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode) !=
            CUBLAS_STATUS_SUCCESS)
      return p;  // this cuBLASLt knows no outer-vector scaling: no candidates
    set_scale_pointers(*p, col_ones, row_scale);
  }
  check(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8F_E4M3, K, N, K), "layout A");
  check(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8F_E4M3, K, M, K), "layout B");
  check(cublasLtMatrixLayoutCreate(&p->c, path == Path::kFp32 ? CUDA_R_32F : CUDA_R_16F, N, M, N), "layout C");
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
  cublasLtMatmulHeuristicResult_t heur[kCandidates]{};
  int found = 0;
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace_bytes, sizeof workspace_bytes);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(h, p->op, p->a, p->b, p->c, p->c, pref, kCandidates, heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (path != Path::kEpilogue) {
    check(s, "AlgoGetHeuristic");
    if (found == 0) throw Error("cuBLASLt FP8: no algorithm for " + shape_text(M, N, K));
  }
  if (s == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < found; ++i)
      if (heur[i].state == CUBLAS_STATUS_SUCCESS) p->candidates.push_back(heur[i].algo);
  return p;
}

// The best of 3 timed runs after one warm-up, in ms; < 0 when the algorithm fails to launch.
float time_algo(const std::function<cublasStatus_t(const cublasLtMatmulAlgo_t&)>& run, const cublasLtMatmulAlgo_t& algo,
                cudaStream_t stream) {
  if (run(algo) != CUBLAS_STATUS_SUCCESS) return -1.0f;
  cudaEvent_t e[2];
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e[0]));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e[1]));
  float best = -1.0f;
  for (int rep = 0; rep < 3; ++rep) {
    NIBBLE_CUDA_CHECK(cudaEventRecord(e[0], stream));
    const cublasStatus_t s = run(algo);
    NIBBLE_CUDA_CHECK(cudaEventRecord(e[1], stream));
    NIBBLE_CUDA_CHECK(cudaEventSynchronize(e[1]));
    float ms = 0;
    NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, e[0], e[1]));
    if (s != CUBLAS_STATUS_SUCCESS) break;
    if (best < 0 || ms < best) best = ms;
  }
  cudaEventDestroy(e[0]);
  cudaEventDestroy(e[1]);
  return best;
}

int m_bucket(int M) {
  int b = 16;
  while (b < M) b *= 2;
  return b;
}

}  // namespace

struct CublasLtFp8::Plans {
  std::map<Key, std::unique_ptr<Plan>> by_shape;
  std::map<Key, cublasLtMatmulAlgo_t> by_bucket;  // the timed choice per (M bucket, N, K, path)
  float* ones = nullptr;                          // the column scales of the epilogue path, all 1
  int64_t ones_n = 0;
  bool autotune = true;
  Plans() = default;
  Plans(const Plans&) = delete;
  Plans& operator=(const Plans&) = delete;
  ~Plans() { cudaFree(ones); }

  Plan& plan(cublasLtHandle_t h, size_t workspace_bytes, int M, int N, int K, Path path, const float* row_scale) {
    auto& slot = by_shape[{M, N, K, path}];
    if (!slot) slot = make_plan(h, workspace_bytes, M, N, K, path, ones, row_scale ? row_scale : ones);
    return *slot;
  }

  // The algorithm of p: chosen on its first call, by the bucket's earlier choice when it applies,
  // else by timing the candidates (when allowed: not while `stream` is being captured).
  const cublasLtMatmulAlgo_t& algo(cublasLtHandle_t h, size_t workspace_bytes, Plan& p, const Key& key,
                                   const std::function<cublasStatus_t(const cublasLtMatmulAlgo_t&)>& run,
                                   cudaStream_t stream) {
    if (p.chosen) return p.algo;
    const Key bucket{m_bucket(std::get<0>(key)), std::get<1>(key), std::get<2>(key), std::get<3>(key)};
    if (auto it = by_bucket.find(bucket); it != by_bucket.end()) {
      cublasLtMatmulHeuristicResult_t r{};
      if (cublasLtMatmulAlgoCheck(h, p.op, p.a, p.b, p.c, p.c, &it->second, &r) == CUBLAS_STATUS_SUCCESS &&
          r.workspaceSize <= workspace_bytes) {
        p.algo = it->second, p.chosen = true;
        return p.algo;
      }
    }
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    NIBBLE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    const bool tune = autotune && capture == cudaStreamCaptureStatusNone && p.candidates.size() > 1;
    p.algo = p.candidates.front();
    if (tune) {
      float best = -1.0f;
      for (const cublasLtMatmulAlgo_t& a : p.candidates) {
        const float ms = time_algo(run, a, stream);
        if (ms >= 0 && (best < 0 || ms < best)) best = ms, p.algo = a;
      }
      by_bucket[bucket] = p.algo;
    }
    p.chosen = true;
    return p.algo;
  }
};

CublasLtFp8::CublasLtFp8() : plans_(std::make_unique<Plans>()) {
  cublasLtHandle_t h = nullptr;
  check(cublasLtCreate(&h), "cublasLtCreate");
  handle_ = h;
  workspace_bytes_ = size_t(32) << 20;
  NIBBLE_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

CublasLtFp8::~CublasLtFp8() {
  plans_.reset();
  cudaFree(workspace_);
  cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

void CublasLtFp8::set_autotune(bool on) { plans_->autotune = on; }

namespace {

void check_lt_shape(int M, int N, int K) {
  if (M < 1 || N < 8 || K < 16 || N % 8 != 0 || K % 16 != 0)
    throw Error("cuBLASLt FP8: unsupported shape " + shape_text(M, N, K) +
                " (need M >= 1, N a multiple of 8, K a multiple of 16)");
}

}  // namespace

void CublasLtFp8::gemm(const uint8_t* x8, const uint8_t* w8, uint16_t* y, int M, int N, int K, float alpha,
                       cudaStream_t stream) {
  check_lt_shape(M, N, K);
  auto h = static_cast<cublasLtHandle_t>(handle_);
  const Key key{M, N, K, Path::kPlain};
  Plan& p = plans_->plan(h, workspace_bytes_, M, N, K, Path::kPlain, nullptr);
  const float beta = 0.0f;
  auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(h, p.op, &alpha, w8, p.a, x8, p.b, &beta, y, p.c, y, p.c, &algo, workspace_,
                          workspace_bytes_, stream);
  };
  check(run(plans_->algo(h, workspace_bytes_, p, key, run, stream)), "cublasLtMatmul");
}

CublasLtFp8::RowScale CublasLtFp8::auto_row_scale(int M, int N, int K) {
  check_lt_shape(M, N, K);
  if (plans_->ones_n < std::max(N, M)) {  // the heuristic may look at the scale pointers: real ones
    const int n = std::max(N, M);
    cudaFree(plans_->ones);
    plans_->ones = nullptr, plans_->ones_n = 0;
    NIBBLE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&plans_->ones), size_t(n) * sizeof(float)));
    plans_->ones_n = n;
    fill_ones(plans_->ones, n, nullptr);
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  auto h = static_cast<cublasLtHandle_t>(handle_);
  const Plan& p = plans_->plan(h, workspace_bytes_, M, N, K, Path::kEpilogue, nullptr);
  return p.candidates.empty() ? RowScale::kSeparatePass : RowScale::kEpilogue;
}

void CublasLtFp8::gemm_row_scaled(const uint8_t* x8, const float* row_scale, const uint8_t* w8, uint16_t* y, int M,
                                  int N, int K, GemmWorkspace& ws, cudaStream_t stream, RowScale how) {
  check_lt_shape(M, N, K);
  if (!x8 || !row_scale || !w8 || !y) throw Error("cuBLASLt FP8 row-scaled GEMM: null pointer argument");
  auto h = static_cast<cublasLtHandle_t>(handle_);
  if (how != RowScale::kSeparatePass) {
    const RowScale avail = auto_row_scale(M, N, K);
    if (how == RowScale::kEpilogue && avail != RowScale::kEpilogue)
      throw Error("cuBLASLt FP8: no outer-vector-scaled (per-token) algorithm for " + shape_text(M, N, K) +
                  " on this GPU / cuBLAS version");
    how = avail;
  }
  const float alpha = 1.0f, beta = 0.0f;
  if (how == RowScale::kEpilogue) {
    const Key key{M, N, K, Path::kEpilogue};
    Plan& p = plans_->plan(h, workspace_bytes_, M, N, K, Path::kEpilogue, row_scale);
    set_scale_pointers(p, plans_->ones, row_scale);
    auto run = [&](const cublasLtMatmulAlgo_t& algo) {
      return cublasLtMatmul(h, p.op, &alpha, w8, p.a, x8, p.b, &beta, y, p.c, y, p.c, &algo, workspace_,
                            workspace_bytes_, stream);
    };
    check(run(plans_->algo(h, workspace_bytes_, p, key, run, stream)), "cublasLtMatmul (outer-vector scales)");
    return;
  }
  const Key key{M, N, K, Path::kFp32};
  Plan& p = plans_->plan(h, workspace_bytes_, M, N, K, Path::kFp32, nullptr);
  auto* c = static_cast<float*>(ws.get(size_t(M) * N * sizeof(float), 0));
  auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(h, p.op, &alpha, w8, p.a, x8, p.b, &beta, c, p.c, c, p.c, &algo, workspace_,
                          workspace_bytes_, stream);
  };
  check(run(plans_->algo(h, workspace_bytes_, p, key, run, stream)), "cublasLtMatmul (FP32 output)");
  scale_rows_to_fp16(c, row_scale, M, N, y, stream);
}

}  // namespace nibble::cuda

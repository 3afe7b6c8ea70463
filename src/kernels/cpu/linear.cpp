// Y = X · W^T with W decoded a tile of rows at a time. Each thread owns whole tiles of N rows:
// it decodes the tile once into a thread-local buffer (fp32 weights are used in place), then runs
// a 4x3 register-blocked AVX2 micro-kernel over all M activation rows, so a decoded row is reused
// M times during prefill.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "kernels/cpu/fused_gemv.h"
#include "kernels/cpu/vec_avx2.h"
#include "nibble/error.h"
#include "nibble/linear.h"

namespace nibble {
namespace {

constexpr int64_t kTileRows = 24;  // weight rows decoded per tile (a multiple of kNR)
constexpr int kMR = 4, kNR = 3;    // micro-kernel: 4 activation rows x 3 weight rows
constexpr int64_t kParallelWork = 1 << 20;  // below this many multiply-adds, threads cost more

// y[i * ldy + j] = a_i . b_j over K for the 4 rows a_i (stride K) and 3 rows b_j (stride K):
// 12 accumulators in named registers (an array of __m256 gets spilled to the stack by GCC).
inline void kernel_4x3(const float* a, const float* b, int64_t K, float* y, int64_t ldy) {
  const float *a0 = a, *a1 = a + K, *a2 = a + 2 * K, *a3 = a + 3 * K;
  const float *b0 = b, *b1 = b + K, *b2 = b + 2 * K;
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
  __m256 c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256 w0 = _mm256_loadu_ps(b0 + k), w1 = _mm256_loadu_ps(b1 + k),
                 w2 = _mm256_loadu_ps(b2 + k);
    __m256 x = _mm256_loadu_ps(a0 + k);
    c00 = _mm256_fmadd_ps(x, w0, c00), c01 = _mm256_fmadd_ps(x, w1, c01), c02 = _mm256_fmadd_ps(x, w2, c02);
    x = _mm256_loadu_ps(a1 + k);
    c10 = _mm256_fmadd_ps(x, w0, c10), c11 = _mm256_fmadd_ps(x, w1, c11), c12 = _mm256_fmadd_ps(x, w2, c12);
    x = _mm256_loadu_ps(a2 + k);
    c20 = _mm256_fmadd_ps(x, w0, c20), c21 = _mm256_fmadd_ps(x, w1, c21), c22 = _mm256_fmadd_ps(x, w2, c22);
    x = _mm256_loadu_ps(a3 + k);
    c30 = _mm256_fmadd_ps(x, w0, c30), c31 = _mm256_fmadd_ps(x, w1, c31), c32 = _mm256_fmadd_ps(x, w2, c32);
  }
  const __m256 acc[4][3] = {{c00, c01, c02}, {c10, c11, c12}, {c20, c21, c22}, {c30, c31, c32}};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) {
      float s = cpu::hsum(acc[i][j]);
      for (int64_t kk = k; kk < K; ++kk) s += a[i * K + kk] * b[j * K + kk];
      y[i * ldy + j] = s;
    }
}

// The edges: fewer than 4 activation rows or 3 weight rows, one dot product at a time (the same
// 8-lane accumulation order as kernel_4x3, so M = 1 and M = 4 give identical results).
inline void kernel_edge(const float* a, int mr, const float* b, int nr, int64_t K, float* y,
                        int64_t ldy) {
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      const float *ai = a + i * K, *bj = b + j * K;
      __m256 c = _mm256_setzero_ps();
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) c = _mm256_fmadd_ps(_mm256_loadu_ps(ai + k), _mm256_loadu_ps(bj + k), c);
      float s = cpu::hsum(c);
      for (; k < K; ++k) s += ai[k] * bj[k];
      y[i * ldy + j] = s;
    }
}

// Y[:, n0:n0+nrows] for decoded rows wt [nrows, K].
void tile_gemm(const float* x, int64_t M, const float* wt, int64_t nrows, int64_t K, float* y,
               int64_t N, int64_t n0) {
  for (int64_t j = 0; j < nrows; j += kNR) {
    const int nr = int(std::min<int64_t>(kNR, nrows - j));
    const float* b = wt + j * K;
    int64_t m = 0;
    if (nr == kNR)
      for (; m + kMR <= M; m += kMR) kernel_4x3(x + m * K, b, K, y + m * N + n0 + j, N);
    for (; m < M; m += kMR)
      kernel_edge(x + m * K, int(std::min<int64_t>(kMR, M - m)), b, nr, K, y + m * N + n0 + j, N);
  }
}

}  // namespace

void linear_cpu(const float* x, int64_t M, const PackedTensor& w, float* y) {
  const int64_t N = w.rows, K = w.cols;
  if (M <= 0 || N <= 0) return;
  if (cpu::fused_linear_cpu(x, M, w, y)) return;  // small M: decode in registers (fused_*.cpp)
  const bool in_place = w.format == "fp32";
  if (in_place && w.qweight.size() != size_t(N * K) * sizeof(float))
    throw Error("linear_cpu: fp32 weight of shape [" + std::to_string(N) + ", " +
                std::to_string(K) + "] holds " + std::to_string(w.qweight.size()) + " bytes");
  const FormatInfo* fmt = in_place ? nullptr : &find_format(w.format);
  const int64_t tiles = (N + kTileRows - 1) / kTileRows;
  std::exception_ptr error;
#pragma omp parallel if (M * N * K >= kParallelWork)
  {
    std::vector<float> buf(in_place ? 0 : size_t(kTileRows * K));
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t n0 = t * kTileRows, nrows = std::min(kTileRows, N - n0);
      try {
        const float* wt;
        if (in_place) {
          wt = reinterpret_cast<const float*>(w.qweight.data()) + n0 * K;
        } else {
          fmt->dequantize_rows(w, n0, nrows, buf.data());
          wt = buf.data();
        }
        tile_gemm(x, M, wt, nrows, K, y, N, n0);
      } catch (...) {
#pragma omp critical
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

void fake_quantize_rows(const FormatInfo& fmt, float* x, int64_t M, int64_t K, int block, std::string_view what) {
  std::exception_ptr error;
#pragma omp parallel for schedule(static) if (M > 1 && M * K >= (1 << 14))
  for (int64_t m = 0; m < M; ++m) {
    try {
      QuantOptions opt;
      opt.block = block;
      opt.name = what;
      PackedTensor p = fmt.quantize(x + m * K, 1, K, opt);
      fmt.dequantize_rows(p, 0, 1, x + m * K);
    } catch (...) {
#pragma omp critical
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace nibble

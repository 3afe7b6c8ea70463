#pragma once
// Deliberately simple CPU references for the GEMM tests: float64 dot products and a brute-force
// E4M3 encoder (nearest of all finite codes, ties to the even code).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/format_name.h"
#include "nibble/half.h"

namespace nibble::cuda::test {

inline double e4m3_to_double(uint8_t b) {
  const int e = (b >> 3) & 0xF, m = b & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (b & 0x80) ? -v : v;
}

inline uint8_t e4m3_from_float(float x) {
  const double a = std::fabs(double(x));
  int best = 0;
  double best_err = a;
  for (int c = 1; c < 0x7F; ++c) {  // 0x7F is NaN; beyond 448 saturates to 0x7E
    const double err = std::fabs(e4m3_to_double(uint8_t(c)) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) == 1)) best = c, best_err = err;
  }
  return uint8_t(best | (std::signbit(x) && best != 0 ? 0x80 : 0));
}

// Y[m, n] = sum_k x(m, k) * w(n, k) in float64, and the sum of |terms| (for tolerances).
struct RefResult {
  std::vector<double> y, abs_sum;
};
template <class X, class W>
RefResult reference_gemm(int M, int N, int K, X x, W w) {
  RefResult r{std::vector<double>(size_t(M) * N), std::vector<double>(size_t(M) * N)};
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0, a = 0;
      for (int k = 0; k < K; ++k) {
        const double p = x(m, k) * w(n, k);
        s += p, a += std::fabs(p);
      }
      r.y[size_t(m) * N + n] = s, r.abs_sum[size_t(m) * N + n] = a;
    }
  return r;
}

// Counts outputs off by more than rel_sum * sum|terms| + 2^-10 * |ref| (fp16 output rounding),
// NaN (unwritten) included; reports the first.
inline int count_bad(const std::vector<uint16_t>& y, const RefResult& ref, double rel_sum, std::string* first) {
  int bad = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double v = half_to_float(y[i]);
    const double tol = rel_sum * ref.abs_sum[i] + std::ldexp(std::fabs(ref.y[i]), -10) + 1e-7;
    if (!(std::fabs(v - ref.y[i]) <= tol)) {
      if (bad++ == 0 && first)
        *first = "index " + std::to_string(i) + ": got " + std::to_string(v) + ", want " + std::to_string(ref.y[i]) +
                 " (tol " + std::to_string(tol) + ")";
    }
  }
  return bad;
}

inline std::vector<uint16_t> random_halves(size_t n, std::mt19937_64& g, float sd) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = float_to_half(d(g));
  return v;
}

// Per-row activation scales for W4A4-style epilogues: 2^[-3, 3] times [1, 2).
inline std::vector<float> random_row_scales(int M, std::mt19937_64& g) {
  std::vector<float> rs(static_cast<size_t>(M));
  for (auto& s : rs) s = std::ldexp(1.0f + float(g() % 1024) / 1024.0f, int(g() % 7) - 3);
  return rs;
}

// Outputs of two kernels that accumulate the same products in FP32 in different orders, each
// rounded to fp16 once, that differ by more than that allows; `first` names the first.
inline int count_order_mismatch(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const RefResult& ref,
                                std::string* first) {
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double va = half_to_float(a[i]), vb = half_to_float(b[i]);
    const double tol = std::ldexp(std::max(std::fabs(va), std::fabs(vb)), -10) + 1e-5 * ref.abs_sum[i] + 1e-7;
    if (!(std::fabs(va - vb) <= tol) && bad++ == 0 && first)
      *first = "index " + std::to_string(i) + ": " + std::to_string(va) + " against " + std::to_string(vb);
  }
  return bad;
}

// Random FP16 weights [N, K] that NestedFP can split (normal, sd 0.05), with edge cases mixed in:
// zeros of both signs, subnormals, the largest eligible magnitudes, upper bytes that round up.
inline std::vector<float> nested_eligible_weights(int N, int K, std::mt19937_64& g) {
  const uint16_t edges[] = {0x0000, 0x8000, 0x0001, 0x83FF, 0x3F7F, 0xBF7F, 0x3C40, 0x3BFF, 0x2E41, 0x0400};
  constexpr size_t kEdges = sizeof(edges) / sizeof(edges[0]);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> w(size_t(N) * K);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = i % 89 < kEdges ? half_to_float(edges[i % 89]) : half_to_float(float_to_half(d(g)));
  return w;
}

}  // namespace nibble::cuda::test

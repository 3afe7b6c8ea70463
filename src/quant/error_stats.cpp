// Relative MSE and SQNR with float64 accumulation.
#include <cmath>
#include <limits>

#include "nibble/error_stats.h"

namespace nibble {

double ErrorStats::rel_mse() const {
  if (sum_sq_err == 0) return 0.0;
  if (sum_sq_ref == 0) return std::numeric_limits<double>::infinity();
  return sum_sq_err / sum_sq_ref;
}

double ErrorStats::sqnr_db() const {
  if (sum_sq_err == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(sum_sq_ref / sum_sq_err);
}

void ErrorStats::add(const float* ref, const float* approx, int64_t n) {
  double err = 0, sq = 0;
#pragma omp parallel for reduction(+ : err, sq) schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    double r = ref[i], d = r - double(approx[i]);
    err += d * d;
    sq += r * r;
  }
  sum_sq_err += err;
  sum_sq_ref += sq;
  count += n;
}

void ErrorStats::merge(const ErrorStats& other) {
  sum_sq_err += other.sum_sq_err;
  sum_sq_ref += other.sum_sq_ref;
  count += other.count;
}

ErrorStats error_stats(const float* ref, const float* approx, int64_t n) {
  ErrorStats s;
  s.add(ref, approx, n);
  return s;
}

}  // namespace nibble

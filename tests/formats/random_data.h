#pragma once
// Test data: fresh random matrices of several distributions with rare big outliers, all-zero
// and tiny-magnitude blocks.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace testdata {

// Grid: multiples of 1/4 in [-8, 8], so values sit exactly on levels and midpoints (ties).
enum class Dist { Gaussian, Laplace, StudentT3, Uniform, Grid };
inline const char* dist_name(Dist d) {
  const char* names[] = {"gaussian", "laplace", "student-t(3)", "uniform", "grid"};
  return names[int(d)];
}
inline constexpr Dist kDists[] = {Dist::Gaussian, Dist::Laplace, Dist::StudentT3, Dist::Uniform,
                                  Dist::Grid};

inline double draw(std::mt19937& rng, Dist d) {
  switch (d) {
    case Dist::Gaussian: return std::normal_distribution<double>(0, 1)(rng);
    case Dist::Laplace: {
      double u = std::uniform_real_distribution<double>(-0.5, 0.5)(rng);
      return (u < 0 ? 1 : -1) * std::log(1 - 2 * std::fabs(u));
    }
    case Dist::StudentT3: return std::student_t_distribution<double>(3)(rng);
    case Dist::Uniform: return std::uniform_real_distribution<double>(-1, 1)(rng);
    case Dist::Grid: return std::uniform_int_distribution<int>(-32, 32)(rng) / 4.0;
  }
  return 0;
}

// rows x cols values of distribution d times `scale`; about 1 in 500 an outlier x30; then, where
// the row is long enough, an all-zero stretch and a tiny-magnitude stretch.
inline std::vector<float> matrix(std::mt19937& rng, Dist d, int64_t rows, int64_t cols, double scale,
                                 double limit = INFINITY) {
  std::vector<float> x(size_t(rows * cols));
  std::uniform_int_distribution<int> rare(0, 499);
  for (float& v : x) {
    double y = draw(rng, d) * scale * (rare(rng) == 0 ? 30 : 1);
    v = float(std::fmax(-limit, std::fmin(limit, y)));
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = &x[size_t(r * cols)];
    if (cols >= 64) {
      for (int64_t i = 0; i < 32; ++i) row[i] = 0.0f;                   // all-zero block(s)
      for (int64_t i = 32; i < 64; ++i) row[i] = float(row[i] * 1e-12);  // tiny magnitudes
    }
    if (cols >= 3) row[cols - 1] = -0.0f;
  }
  return x;
}

}  // namespace testdata

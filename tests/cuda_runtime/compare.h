#pragma once
// Helpers of the GPU runtime tests: fresh seeds, logits comparisons, random prompts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace nibble::cuda::test {

// The GPU runs FP16 activations around an FP32 residual stream; the CPU Session is FP32
// throughout. Logits may differ by this much, relative to the RMS of the CPU logits.
inline constexpr double kLogitsTol = 2e-2;

inline uint32_t fresh_seed() {
  std::random_device rd;
  return rd();
}

struct Diff {
  double rel_rms = 0, max_abs = 0;
};

// got vs want: RMS(got - want) / RMS(want) and max |got - want|.
inline Diff diff(std::span<const float> got, std::span<const float> want) {
  EXPECT_EQ(got.size(), want.size());
  double se = 0, sw = 0, mx = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double e = double(got[i]) - double(want[i]);
    if (!std::isfinite(got[i])) mx = INFINITY;
    se += e * e, sw += double(want[i]) * want[i], mx = std::max(mx, std::fabs(e));
  }
  return {std::sqrt(se / std::max(sw, 1e-300)), mx};
}

inline int32_t argmax_of(std::span<const float> row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

// Largest minus second largest entry.
inline double top2_margin(std::span<const float> row) {
  float a = -INFINITY, b = -INFINITY;
  for (float v : row)
    if (v > a) b = a, a = v;
    else if (v > b) b = v;
  return double(a) - double(b);
}

// Where the CPU's winner leads by more than twice the largest logit error, the GPU must pick it
// too (it cannot flip otherwise); closer calls are not checked.
inline void expect_same_winner(std::span<const float> got, std::span<const float> want, double max_abs) {
  if (top2_margin(want) > 4 * max_abs) {
    EXPECT_EQ(argmax_of(got), argmax_of(want));
  }
}

inline std::vector<int32_t> random_tokens(std::mt19937& gen, int n, int vocab) {
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = d(gen);
  return t;
}

}  // namespace nibble::cuda::test

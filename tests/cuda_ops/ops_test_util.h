#pragma once
// Helpers of the GPU op tests: a freshly seeded generator, fp16 data, device buffers, and a
// tolerance check that reports the first few misses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/gpu_buffer.h"
#include "nibble/half.h"

namespace nibble::cuda::test {

// A generator seeded from std::random_device; the seed goes into every failure message.
struct SeededTest : ::testing::Test {
  uint64_t seed = std::random_device{}();
  std::mt19937_64 gen{seed};
  ::testing::ScopedTrace trace{__FILE__, __LINE__, "seed " + std::to_string(seed)};

  float normal(float sd = 1.0f) { return std::normal_distribution<float>(0.0f, sd)(gen); }
  int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(gen); }

  // n fp16 values ~ N(0, sd), rounded to fp16.
  std::vector<uint16_t> random_half(size_t n, float sd = 1.0f) {
    std::vector<uint16_t> h(n);
    for (auto& v : h) v = float_to_half(normal(sd));
    return h;
  }
  std::vector<float> random_float(size_t n, float sd = 1.0f) {
    std::vector<float> f(n);
    for (auto& v : f) v = normal(sd);
    return f;
  }
};

inline double h2d(uint16_t h) { return double(half_to_float(h)); }

// Counts the elements with |got - ref| > tol(ref) (NaN always misses); reports the first 5.
class CloseCheck {
 public:
  explicit CloseCheck(std::string what) : what_(std::move(what)) {}
  void operator()(double got, double ref, double tol, const std::string& where) {
    if (std::fabs(got - ref) <= tol) return;  // false for NaN
    if (++misses_ <= 5) ADD_FAILURE() << what_ << " at " << where << ": got " << got << ", want " << ref << " +- " << tol;
  }
  ~CloseCheck() { EXPECT_EQ(misses_, 0) << what_ << ": " << misses_ << " elements out of tolerance"; }

 private:
  std::string what_;
  int misses_ = 0;
};

}  // namespace nibble::cuda::test

// linear_cpu against a float64 reference over the registry's own full dequantization.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/linear.h"

namespace nibble {
namespace {

struct Rng {
  unsigned seed = std::random_device{}();
  std::mt19937 gen{seed};
  std::vector<float> normal(size_t n, float sd = 1.0f) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(gen);
    return v;
  }
};

// Y[m][n] = sum_k X[m][k] * W[n][k] in float64, W given as floats.
std::vector<double> reference(const std::vector<float>& x, int64_t M, const std::vector<float>& w,
                              int64_t N, int64_t K) {
  std::vector<double> y(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x[size_t(m * K + k)]) * w[size_t(n * K + k)];
      y[size_t(m * N + n)] = s;
    }
  return y;
}

// Checks one format over several M for a [N, K] weight.
void check_format(const std::string& format, int64_t N, int64_t K) {
  Rng rng;
  SCOPED_TRACE("format " + format + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               " seed " + std::to_string(rng.seed));
  const std::vector<float> w = rng.normal(size_t(N * K), 0.05f);
  const PackedTensor p = quantize(format, w.data(), N, K);
  const std::vector<float> wd = dequantize(p);  // the format's own decode is the reference W
  for (int64_t M : {1, 3, 17}) {
    const std::vector<float> x = rng.normal(size_t(M * K));
    std::vector<float> y(size_t(M * N), NAN);
    linear_cpu(x.data(), M, p, y.data());
    const std::vector<double> ref = reference(x, M, wd, N, K);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double mag = 0;  // error bound scales with sum |x||w| (float accumulation)
        for (int64_t k = 0; k < K; ++k)
          mag += std::fabs(double(x[size_t(m * K + k)]) * wd[size_t(n * K + k)]);
        ASSERT_NEAR(y[size_t(m * N + n)], ref[size_t(m * N + n)], 1e-5 * mag + 1e-30)
            << "M=" << M << " m=" << m << " n=" << n;
      }
  }
}

TEST(LinearCpu, Fp32OddShapes) {
  check_format("fp32", 53, 77);
  check_format("fp32", 1, 1);
  check_format("fp32", 7, 5);
}

TEST(LinearCpu, HalfFormatsOddShapes) {
  check_format("bf16", 50, 77);
  check_format("fp16", 29, 131);
}

TEST(LinearCpu, BlockFormats) {
  for (const char* f : {"int4-g128", "nf4", "mxfp4", "nvfp4", "nvfp4-4over6", "nvfp4-razer",
                        "fp4-g128", "razer-fp4-g128", "razer-fp3-g128", "fp8-e4m3", "nestedfp"})
    check_format(f, 53, 384);
}

TEST(LinearCpu, ZeroRowsIsNoop) {
  const std::vector<float> w(12, 1.0f);
  const PackedTensor p = quantize("fp32", w.data(), 3, 4);
  float y = 42.0f;
  linear_cpu(nullptr, 0, p, &y);
  EXPECT_EQ(y, 42.0f);
}

TEST(LinearCpu, TruncatedFp32WeightThrows) {
  const std::vector<float> w(12, 1.0f);
  PackedTensor p = quantize("fp32", w.data(), 3, 4);
  p.qweight.resize(p.qweight.size() - 4);
  std::vector<float> x(4, 1.0f), y(3);
  EXPECT_THROW(linear_cpu(x.data(), 1, p, y.data()), Error);
}

TEST(FakeQuantizeRows, EachRowIndependently) {
  Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed));
  const int64_t M = 5, K = 96;
  for (const FormatInfo& f : all_formats()) {
    if (!f.for_activations) continue;
    SCOPED_TRACE(std::string(f.name));
    std::vector<float> x = rng.normal(size_t(M * K));
    x[0] = 0;  // an exact zero stays representable in every format
    std::vector<float> got = x;
    fake_quantize_rows(f, got.data(), M, K);
    for (int64_t m = 0; m < M; ++m) {
      const std::vector<float> want = dequantize(quantize(f.name, x.data() + m * K, 1, K));
      for (int64_t k = 0; k < K; ++k) ASSERT_EQ(got[size_t(m * K + k)], want[size_t(k)]);
    }
    EXPECT_EQ(got[0], 0.0f);
  }
}

TEST(FakeQuantizeRows, NonFiniteActivationThrows) {
  for (const FormatInfo& f : all_formats()) {
    if (!f.for_activations || f.name == "fp32") continue;
    std::vector<float> x(64, 1.0f);
    x[5] = NAN;
    EXPECT_THROW(fake_quantize_rows(f, x.data(), 1, 64), Error) << f.name;
  }
}

}  // namespace
}  // namespace nibble

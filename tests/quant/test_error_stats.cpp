// Error statistics and the random generators of the quantization lab.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nibble/error.h"
#include "nibble/error_stats.h"

namespace nibble {
namespace {

TEST(ErrorStats, MatchesDirectFloat64Sums) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f), noise(-0.1f, 0.1f);
  const int n = 1 + int(rng() % 5000);
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  long double err = 0, ref = 0;
  for (int i = 0; i < n; ++i) {
    x[size_t(i)] = u(rng);
    y[size_t(i)] = x[size_t(i)] + noise(rng);
    long double d = (long double)x[size_t(i)] - y[size_t(i)];
    err += d * d;
    ref += (long double)x[size_t(i)] * x[size_t(i)];
  }
  ErrorStats s = error_stats(x.data(), y.data(), n);
  EXPECT_EQ(s.count, n);
  EXPECT_NEAR(s.rel_mse(), double(err / ref), 1e-12 * double(err / ref));
  EXPECT_NEAR(s.sqnr_db(), double(10 * std::log10(ref / err)), 1e-9);
}

TEST(ErrorStats, MergeEqualsOnePass) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> x = random_values({}, 3000, seed), y = random_values({}, 3000, seed + 1);
  ErrorStats a = error_stats(x.data(), y.data(), 1000);
  a.merge(error_stats(x.data() + 1000, y.data() + 1000, 2000));
  ErrorStats all = error_stats(x.data(), y.data(), 3000);
  EXPECT_NEAR(a.rel_mse(), all.rel_mse(), 1e-12 * all.rel_mse());
  EXPECT_EQ(a.count, 3000);
}

TEST(ErrorStats, EdgeCases) {
  std::vector<float> zeros(8, 0.0f), ones(8, 1.0f);
  EXPECT_EQ(error_stats(ones.data(), ones.data(), 8).rel_mse(), 0.0);
  EXPECT_TRUE(std::isinf(error_stats(ones.data(), ones.data(), 8).sqnr_db()));
  EXPECT_EQ(error_stats(zeros.data(), zeros.data(), 8).rel_mse(), 0.0);
  EXPECT_TRUE(std::isinf(error_stats(zeros.data(), ones.data(), 8).rel_mse()));
  EXPECT_DOUBLE_EQ(error_stats(ones.data(), zeros.data(), 8).rel_mse(), 1.0);
  EXPECT_DOUBLE_EQ(error_stats(ones.data(), zeros.data(), 8).sqnr_db(), 0.0);
  EXPECT_EQ(error_stats(ones.data(), zeros.data(), 0).count, 0);
}

TEST(Distributions, Parse) {
  EXPECT_EQ(parse_distribution("gaussian")->kind, Distribution::Kind::Gaussian);
  EXPECT_EQ(parse_distribution("laplace")->kind, Distribution::Kind::Laplace);
  auto t = parse_distribution("student-t:3.5");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind, Distribution::Kind::StudentT);
  EXPECT_EQ(t->nu, 3.5);
  EXPECT_EQ(t->name(), "student-t:3.5");
  EXPECT_FALSE(parse_distribution("weights.safetensors"));
  for (const char* bad : {"student-t", "student-t:", "student-t:0", "student-t:-2",
                          "student-t:4x", "student-t:nan", "student-t4"})
    EXPECT_THROW(parse_distribution(bad), Error) << bad;
}

TEST(Distributions, SameSeedSameValuesFreshSeedDifferent) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (auto d : {Distribution{Distribution::Kind::Gaussian}, Distribution{Distribution::Kind::Laplace},
                 Distribution{Distribution::Kind::StudentT, 4}}) {
    EXPECT_EQ(random_values(d, 100, seed), random_values(d, 100, seed));
    EXPECT_NE(random_values(d, 100, seed), random_values(d, 100, seed ^ 0x9E3779B97F4A7C15ull));
  }
}

// Sample moments of 2^18 draws: variance (gaussian 1, laplace 2, student-t nu/(nu-2)) and
// kurtosis (3, 6, and 3 + 6/(nu-4) = 4 for nu = 10, whose 8th moment is still finite so the
// sample kurtosis settles) within about 5 standard errors.
TEST(Distributions, MomentsMatchTheDistribution) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Case {
    Distribution d;
    double var, kurt_lo, kurt_hi;
  };
  for (const Case& c : {Case{{Distribution::Kind::Gaussian}, 1.0, 2.9, 3.1},
                        Case{{Distribution::Kind::Laplace}, 2.0, 5.4, 6.6},
                        Case{{Distribution::Kind::StudentT, 10}, 1.25, 3.6, 4.6}}) {
    const int n = 1 << 18;
    std::vector<float> v = random_values(c.d, n, seed);
    double m1 = 0, m2 = 0, m4 = 0;
    for (float x : v) m1 += x;
    m1 /= n;
    for (float x : v) {
      double d = x - m1;
      m2 += d * d;
      m4 += d * d * d * d;
    }
    m2 /= n;
    m4 /= n;
    SCOPED_TRACE(c.d.name());
    EXPECT_NEAR(m1, 0.0, 6 * std::sqrt(c.var / n));
    EXPECT_NEAR(m2, c.var, 0.05 * c.var);
    EXPECT_GT(m4 / (m2 * m2), c.kurt_lo);
    EXPECT_LT(m4 / (m2 * m2), c.kurt_hi);
  }
}

}  // namespace
}  // namespace nibble

// entropy_nats / argmax / softmax_candidates against closed forms and the float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "nibble/error.h"
#include "nibble/sampler.h"
#include "sample/reference.h"

namespace {

std::vector<float> random_logits(std::mt19937_64& rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> z(n);
  for (float& v : z) v = d(rng);
  return z;
}

}  // namespace

TEST(Entropy, KnownDistributions) {
  for (int n : {1, 2, 7, 49152}) {
    std::vector<float> flat(size_t(n), 3.25f);
    EXPECT_NEAR(nibble::entropy_nats(flat.data(), n), std::log(double(n)), 1e-12) << n;
  }
  // two tokens with probabilities 1/(1+e^-d) and e^-d/(1+e^-d)
  for (double d : {0.0, 0.5, 3.0, 30.0}) {
    std::vector<float> z = {0.0f, float(-d)};
    double p = 1 / (1 + std::exp(-d)), q = 1 - p;
    double h = -(p * std::log(p) + (q > 0 ? q * std::log(q) : 0));
    EXPECT_NEAR(nibble::entropy_nats(z.data(), 2), h, 1e-12) << d;
  }
  // masked (-inf) tokens carry no mass: one live token has entropy 0, k live tokens log k
  std::vector<float> masked(100, -INFINITY);
  masked[42] = 1.0f;
  EXPECT_EQ(nibble::entropy_nats(masked.data(), 100), 0.0);
  masked[7] = masked[99] = 1.0f;
  EXPECT_NEAR(nibble::entropy_nats(masked.data(), 100), std::log(3.0), 1e-12);
}

TEST(Entropy, MatchesReferenceOnRandomLogits) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 50; ++trial) {
    size_t n = 1 + rng() % 5000;
    float scale = std::ldexp(1.0f, int(rng() % 10) - 4);
    auto z = random_logits(rng, n, scale);
    z[rng() % n] += 1000.0f;  // shift invariance: one huge logit must not overflow
    double want = ref::entropy(ref::softmax(z));
    EXPECT_NEAR(nibble::entropy_nats(z.data(), int64_t(n)), want, 1e-9 * (1 + want));
  }
}

TEST(Entropy, RejectsBadLogits) {
  std::vector<float> z = {0.0f, NAN, 1.0f};
  EXPECT_THROW(nibble::entropy_nats(z.data(), 3), nibble::Error);
  z[1] = INFINITY;
  EXPECT_THROW(nibble::entropy_nats(z.data(), 3), nibble::Error);
  std::vector<float> all_masked(4, -INFINITY);
  EXPECT_THROW(nibble::entropy_nats(all_masked.data(), 4), nibble::Error);
  EXPECT_THROW(nibble::entropy_nats(z.data(), 0), nibble::Error);
  EXPECT_THROW(nibble::argmax(z.data(), 3), nibble::Error);
}

TEST(Argmax, LowestIndexOnTies) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 100; ++trial) {
    size_t n = 1 + rng() % 300;
    std::vector<float> z(n);
    for (float& v : z) v = float(int(rng() % 7) - 3);  // many ties
    size_t want = 0;
    for (size_t i = 1; i < n; ++i)
      if (z[i] > z[want]) want = i;
    EXPECT_EQ(nibble::argmax(z.data(), int64_t(n)), int32_t(want));
  }
}

TEST(Softmax, MatchesReferenceAtTemperature) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (double t : {0.05, 0.6, 1.0, 2.5}) {
    auto z = random_logits(rng, 1 + rng() % 2000, 3.0f);
    auto want = ref::softmax(z, t);
    auto got = nibble::softmax_candidates(z.data(), int64_t(z.size()), t);
    ASSERT_EQ(got.size(), z.size());
    for (size_t i = 0; i < z.size(); ++i) {
      EXPECT_EQ(got[i].id, int32_t(i));
      EXPECT_NEAR(got[i].prob, want[i], 1e-12 + 1e-9 * want[i]);
    }
  }
  std::vector<float> z = {1.0f, 2.0f};
  EXPECT_THROW(nibble::softmax_candidates(z.data(), 2, 0.0), nibble::Error);
  EXPECT_THROW(nibble::softmax_candidates(z.data(), 2, NAN), nibble::Error);
}

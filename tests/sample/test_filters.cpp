// top-k / top-p / min-p: the kept sets and renormalized probabilities against brute force.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "nibble/error.h"
#include "nibble/sampler.h"
#include "sample/reference.h"

namespace {

using Cands = std::vector<nibble::Candidate>;

// Logits with plenty of exact ties (coarse grid) or none (continuous), drawn fresh.
std::vector<float> random_logits(std::mt19937_64& rng, size_t n, bool ties) {
  std::vector<float> z(n);
  std::normal_distribution<float> d(0.0f, float(0.5 + double(rng() % 40) / 10));
  for (float& v : z) v = ties ? std::round(d(rng) * 2) / 2 : d(rng);
  return z;
}

Cands candidates_of(const std::vector<float>& z) {
  return nibble::softmax_candidates(z.data(), int64_t(z.size()), 1.0);
}

std::set<int32_t> ids_of(const Cands& c) {
  std::set<int32_t> s;
  for (const auto& x : c) s.insert(x.id);
  return s;
}

// Kept ids equal `want` (each once), probabilities renormalized over the kept set.
void expect_kept(const Cands& got, const std::vector<double>& p, const std::set<int32_t>& want) {
  ASSERT_EQ(ids_of(got), want);
  ASSERT_EQ(got.size(), want.size());  // no duplicates
  auto q = ref::restrict(p, want);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i].prob, q[size_t(got[i].id)], 1e-12);
  }
}

class Filters : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }
  std::string trace() const { return "seed " + std::to_string(seed_); }
  unsigned seed_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace

TEST_F(Filters, TopKMatchesBruteForce) {
  SCOPED_TRACE(trace());
  for (int trial = 0; trial < 200; ++trial) {
    auto z = random_logits(rng_, 1 + rng_() % 300, trial % 2);
    auto p = ref::softmax(z);
    int k = int(rng_() % (z.size() + 3));
    auto c = candidates_of(z);
    nibble::keep_top_k(c, k);
    if (k == 0 || size_t(k) >= z.size()) {
      EXPECT_EQ(c.size(), z.size());  // neutral: unchanged
      continue;
    }
    expect_kept(c, p, ref::top_k(p, k));
  }
}

TEST_F(Filters, TopPMatchesBruteForce) {
  SCOPED_TRACE(trace());
  for (int trial = 0; trial < 200; ++trial) {
    // sizes past the 64-entry first head, so the growing partial sort is exercised
    auto z = random_logits(rng_, 1 + rng_() % 1500, trial % 2);
    auto p = ref::softmax(z);
    double pp = std::uniform_real_distribution<double>(0.01, 0.999)(rng_);
    auto c = candidates_of(z);
    nibble::keep_top_p(c, pp);
    expect_kept(c, p, ref::top_p(p, pp));
  }
}

TEST_F(Filters, MinPMatchesBruteForce) {
  SCOPED_TRACE(trace());
  for (int trial = 0; trial < 200; ++trial) {
    auto z = random_logits(rng_, 1 + rng_() % 300, trial % 2);
    auto p = ref::softmax(z);
    double pp = std::uniform_real_distribution<double>(0.001, 1.0)(rng_);
    auto c = candidates_of(z);
    nibble::keep_min_p(c, pp);
    expect_kept(c, p, ref::min_p(p, pp));
  }
}

TEST(FiltersEdge, ExactMassAndTies) {
  // four equal tokens: top-p 0.5 keeps exactly the two lowest ids, 0.5000001 keeps three
  std::vector<float> z = {2.0f, 2.0f, 2.0f, 2.0f};
  auto c = candidates_of(z);
  nibble::keep_top_p(c, 0.5);
  EXPECT_EQ(ids_of(c), (std::set<int32_t>{0, 1}));
  c = candidates_of(z);
  nibble::keep_top_p(c, 0.5000001);
  EXPECT_EQ(ids_of(c), (std::set<int32_t>{0, 1, 2}));
  c = candidates_of(z);
  nibble::keep_top_k(c, 1);
  EXPECT_EQ(ids_of(c), (std::set<int32_t>{0}));
  EXPECT_DOUBLE_EQ(c[0].prob, 1.0);
  // min-p 1 keeps every token tied at the maximum
  std::vector<float> y = {1.0f, 3.0f, 0.0f, 3.0f};
  c = candidates_of(y);
  nibble::keep_min_p(c, 1.0);
  EXPECT_EQ(ids_of(c), (std::set<int32_t>{1, 3}));
  // a tiny top-p keeps the single best token
  c = candidates_of(y);
  nibble::keep_top_p(c, 1e-9);
  EXPECT_EQ(ids_of(c), (std::set<int32_t>{1}));
}

TEST(FiltersEdge, MaskedTokensNeverKept) {
  std::vector<float> z(50, -INFINITY);
  z[3] = 0.0f;
  z[40] = 1.0f;
  auto c = candidates_of(z);
  nibble::keep_top_p(c, 0.999999);
  EXPECT_EQ(ids_of(c), (std::set<int32_t>{3, 40}));
  c = candidates_of(z);
  nibble::keep_min_p(c, 1e-12);
  EXPECT_EQ(ids_of(c), (std::set<int32_t>{3, 40}));
}

TEST(FiltersEdge, RejectsOutOfRangeParameters) {
  std::vector<float> z = {1.0f, 2.0f};
  auto c = candidates_of(z);
  EXPECT_THROW(nibble::keep_top_p(c, 0.0), nibble::Error);
  EXPECT_THROW(nibble::keep_top_p(c, NAN), nibble::Error);
  EXPECT_THROW(nibble::keep_min_p(c, 1.5), nibble::Error);
  Cands none;
  std::mt19937_64 rng(1);
  EXPECT_THROW(nibble::draw(none, rng), nibble::Error);
  for (auto bad : {+[](nibble::SamplerConfig& s) { s.top_p = 0; },
                   +[](nibble::SamplerConfig& s) { s.top_p = 1.5; },
                   +[](nibble::SamplerConfig& s) { s.min_p = -0.1; },
                   +[](nibble::SamplerConfig& s) { s.top_k = -1; },
                   +[](nibble::SamplerConfig& s) { s.temperature = -1; },
                   +[](nibble::SamplerConfig& s) { s.temperature = INFINITY; }}) {
    nibble::SamplerConfig cfg;
    bad(cfg);
    EXPECT_THROW(nibble::Sampler{cfg}, nibble::Error);
  }
}

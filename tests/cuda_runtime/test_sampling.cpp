// What reads a step's logits on the device: sample(), entropies(), prefill_nll().
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "cuda_runtime/compare.h"
#include "cuda_runtime/models.h"
#include "nibble/cuda/runtime.h"
#include "nibble/error.h"
#include "nibble/sampler.h"

namespace nibble::cuda::test {
namespace {

// A batch of three slots after one decode step, its logits copied back.
struct Stepped {
  std::unique_ptr<Model> m;
  std::unique_ptr<DeviceModel> dm;
  std::unique_ptr<Batch> b;
  std::vector<float> logits;
  int V = 0;
};

Stepped three_rows(const TinyHf& model, std::mt19937& gen) {
  Stepped s;
  s.m = load(model, "nvfp4");
  s.V = s.m->config().vocab_size;
  s.dm = std::make_unique<DeviceModel>(*s.m);
  s.b = std::make_unique<Batch>(*s.dm, BatchOptions{3, 64, true});
  for (int slot = 0; slot < 3; ++slot) s.b->prefill(slot, random_tokens(gen, 4 + 3 * slot, s.V));
  const std::vector<int> slots = {2, 0, 1};
  s.logits = s.b->decode(slots, random_tokens(gen, 3, s.V));
  return s;
}

std::span<const float> row(const Stepped& s, int r) {
  return std::span<const float>(s.logits).subspan(size_t(r) * s.V, size_t(s.V));
}

TEST(DeviceSampling, GreedyIsArgmaxOfLogits) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  Stepped s = three_rows(tied_model(), gen);
  const std::vector<SampleParams> greedy(3, SampleParams{0.0f, 1.0f, 0.5f});
  const std::vector<int32_t> ids = s.b->sample(greedy);
  ASSERT_EQ(ids.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ids[size_t(r)], nibble::argmax(row(s, r).data(), s.V)) << "row " << r;
}

TEST(DeviceSampling, EntropiesMatchTheCpuAndDriveReset) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  Stepped s = three_rows(llama_model(768), gen);
  const std::vector<float> h = s.b->entropies();
  ASSERT_EQ(h.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const double want = entropy_nats(row(s, r).data(), s.V);
    EXPECT_NEAR(h[size_t(r)], want, 1e-4 * want + 1e-5) << "row " << r;
    // ReSET fed the GPU's entropy decides as it does from the logits themselves
    auto text = [](int32_t) { return std::string("x"); };
    ResetController from_logits(ResetParams{}, text), from_entropy(ResetParams{}, text);
    const ResetDecision a = from_logits.decide(row(s, r).data(), s.V), b = from_entropy.decide_entropy(h[size_t(r)]);
    if (std::fabs(want - ResetParams{}.tau0) > 1e-3) {
      EXPECT_EQ(a.temperature, b.temperature);
    }
  }
  auto text = [](int32_t) { return std::string("x"); };
  ResetController c(ResetParams{}, text);
  EXPECT_THROW(c.decide_entropy(-1.0), Error);
  EXPECT_THROW(c.decide_entropy(NAN), Error);
}

// ReSET's rule on the device: each row takes t_high when its entropy reaches the threshold, else
// t_low, and draws exactly as sample() does at that temperature; the entropies come back.
TEST(DeviceSampling, SampleByEntropyAppliesTheRuleOnTheDevice) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  Stepped s = three_rows(llama_model(768), gen);
  const std::vector<float> h = s.b->entropies();
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<EntropyRule> rules(3);
  std::vector<SampleParams> same(3);
  for (int r = 0; r < 3; ++r) {
    const bool high = r != 1;  // row 1 below its threshold, the others at or above theirs
    rules[size_t(r)] = {high ? double(h[size_t(r)]) : double(h[size_t(r)]) + 0.5, 0.3f, 1.2f, 0.9f, u(gen)};
    same[size_t(r)] = {high ? 1.2f : 0.3f, 0.9f, rules[size_t(r)].u};
  }
  std::vector<float> got_h;
  const std::vector<int32_t> ids = s.b->sample_by_entropy(rules, &got_h);
  EXPECT_EQ(got_h, h);
  EXPECT_EQ(ids, s.b->sample(same));
  rules[0].threshold = NAN;
  EXPECT_THROW(s.b->sample_by_entropy(rules, &got_h), Error);
}

// The draw with uniform u follows the inverse CDF over the nucleus in descending-probability
// order (float64 reference on the copied logits); draws within 1e-5 of a boundary are skipped.
TEST(DeviceSampling, TemperatureTopPFollowsTheInverseCdf) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  Stepped s = three_rows(tied_model(), gen);  // peaked logits: nuclei of a few to many tokens
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<SampleParams> p(3);
    for (SampleParams& q : p) q = {1.0f + 7.0f * ud(gen), 0.3f + 0.7f * ud(gen), std::min(ud(gen), 0.9999f)};
    const std::vector<int32_t> got = s.b->sample(p);
    for (int r = 0; r < 3; ++r) {
      const std::vector<Candidate> probs = softmax_candidates(row(s, r).data(), s.V, p[size_t(r)].temperature);
      std::vector<Candidate> sorted = probs;
      std::stable_sort(sorted.begin(), sorted.end(), [](const Candidate& a, const Candidate& b) { return a.prob > b.prob; });
      double mass = 0;
      size_t keep = 0;
      while (keep < sorted.size() && (keep == 0 || mass < p[size_t(r)].top_p)) mass += sorted[keep++].prob;
      const double target = p[size_t(r)].u * mass;
      double cum = 0;
      int32_t want = sorted[keep - 1].id;
      bool near_edge = false;
      for (size_t i = 0; i < keep; ++i) {
        near_edge |= std::fabs(cum + sorted[i].prob - target) < 1e-5 || std::fabs(cum - target) < 1e-5;
        if (target < cum + sorted[i].prob) {
          want = sorted[i].id;
          break;
        }
        cum += sorted[i].prob;
      }
      if (!near_edge) {
        EXPECT_EQ(got[size_t(r)], want) << "trial " << trial << " row " << r;
      }
    }
  }
}

// Top-k 1, and min-p 1, leave only the most probable token: the draw is the argmax whatever u.
TEST(DeviceSampling, TopKOneAndMinPOneAreGreedy) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  Stepped s = three_rows(tied_model(), gen);
  std::uniform_real_distribution<float> ud(0.0f, 0.9999f);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<SampleParams> top1(3), minp1(3);
    for (int r = 0; r < 3; ++r) {
      top1[size_t(r)] = {1.5f, 1.0f, ud(gen), 1, 0.0f};
      minp1[size_t(r)] = {1.5f, 0.9f, ud(gen), 0, 1.0f};
    }
    const std::vector<int32_t> a = s.b->sample(top1), b = s.b->sample(minp1);
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(a[size_t(r)], nibble::argmax(row(s, r).data(), s.V)) << "top-k 1, row " << r;
      EXPECT_EQ(b[size_t(r)], nibble::argmax(row(s, r).data(), s.V)) << "min-p 1, row " << r;
    }
  }
}

TEST(DeviceSampling, BadParametersAreRejected) {
  std::mt19937 gen(fresh_seed());
  Stepped s = three_rows(llama_model(768), gen);
  EXPECT_THROW(s.b->sample(std::vector<SampleParams>(2)), Error);  // 3 rows
  EXPECT_THROW(s.b->sample(std::vector<SampleParams>(3, SampleParams{1, 0, 0.5f})), Error);
  EXPECT_THROW(s.b->sample(std::vector<SampleParams>(3, SampleParams{1, 1, 1.0f})), Error);
  EXPECT_THROW(s.b->sample(std::vector<SampleParams>(3, SampleParams{1, 1, 0.5f, -1})), Error);
  EXPECT_THROW(s.b->sample(std::vector<SampleParams>(3, SampleParams{1, 1, 0.5f, 0, 1.5f})), Error);
  EXPECT_THROW(s.b->sample(std::vector<SampleParams>(3, SampleParams{1, 1, 0.5f, 0, NAN})), Error);
}

TEST(DevicePerplexity, PrefillNllMatchesTheCpu) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("model seed " + std::to_string(model_seed()) + ", prompt seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  const auto m = load(llama_model(768), "razer-fp4-g128");
  const int V = m->config().vocab_size, n = 600;  // two chunks
  const std::vector<int32_t> ids = random_tokens(gen, n, V);
  Session cpu(*m, n);
  const std::vector<float> logits = cpu.forward(ids, true);
  DeviceModel dm(*m);
  Batch b(dm, {1, n, true});
  const std::vector<float> nll = b.prefill_nll(0, ids);
  ASSERT_EQ(nll.size(), size_t(n - 1));
  double worst = 0, sum_got = 0, sum_want = 0;
  for (int i = 0; i + 1 < n; ++i) {
    const float* z = logits.data() + size_t(i) * V;
    const double mx = *std::max_element(z, z + V);
    double se = 0;
    for (int j = 0; j < V; ++j) se += std::exp(double(z[j]) - mx);
    const double want = std::log(se) + mx - z[ids[size_t(i) + 1]];
    worst = std::max(worst, std::fabs(nll[size_t(i)] - want));
    sum_got += nll[size_t(i)], sum_want += want;
  }
  EXPECT_LE(worst, 5e-2);
  EXPECT_NEAR(sum_got / (n - 1), sum_want / (n - 1), 5e-3 * sum_want / (n - 1));
  EXPECT_EQ(b.position(0), n);
}

}  // namespace
}  // namespace nibble::cuda::test

// ReSET against ../shared/RESET.md recomputed from scratch per token (tests/sample/reference.h),
// over random logit sequences with injected step boundaries.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "nibble/error.h"
#include "nibble/sampler.h"
#include "sample/reference.h"

namespace {

constexpr int kVocab = 40;

// Token texts: a few that matter for step boundaries, the rest plain words.
std::string token_text(int32_t id) {
  switch (id) {
    case 0: return "\n";
    case 1: return "\n\n";
    case 2: return "x\n\ny";
    case 3: return " \n";     // not exactly "\n"
    case 4: return "\n ";     // not exactly "\n"
    default: return std::string("w").append(std::to_string(id));
  }
}

// Logits whose entropy varies a lot from token to token: a random sharpness, sometimes a spike.
std::vector<float> random_logits(std::mt19937_64& rng) {
  std::vector<float> z(kVocab);
  double sharp = std::exp(std::uniform_real_distribution<double>(-3.0, 2.5)(rng));
  std::normal_distribution<double> d(0.0, 1.0);
  for (float& v : z) v = float(d(rng) * sharp);
  if (rng() % 5 == 0) z[rng() % kVocab] += 12.0f;
  return z;
}

// A token stream with step boundaries injected at a per-sequence rate, incl. runs of "\n".
int32_t next_token(std::mt19937_64& rng, double boundary_rate) {
  double u = std::uniform_real_distribution<double>(0, 1)(rng);
  if (u < boundary_rate * 0.5) return 0;                         // "\n" (runs happen)
  if (u < boundary_rate) return int32_t(1 + rng() % 4);          // "\n\n", "x\n\ny", near misses
  return int32_t(5 + rng() % (kVocab - 5));
}

struct Coverage {
  int branch[2][2] = {};   // [uncertain][high temperature]
  int step_mean = 0;       // tokens where n >= w (mean over the current step)
  int window_cross = 0;    // tokens in a new step whose window reaches into the previous one
};

void check_sequence(std::mt19937_64& rng, int window, Coverage& cov) {
  nibble::ResetParams p;
  p.window = window;
  p.tau0 = std::uniform_real_distribution<double>(0.3, 2.5)(rng);
  nibble::ResetController ctl(p, token_text);
  const double boundary_rate = std::uniform_real_distribution<double>(0.01, 0.3)(rng);
  std::vector<double> H;
  std::vector<std::string> texts;
  size_t t0 = 0;
  for (size_t t = 0; t < 400; ++t) {
    auto z = random_logits(rng);
    H.push_back(ref::entropy(ref::softmax(z)));
    auto want = ref::reset_signals(H, texts, t, size_t(window), p.t_low, p.t_high, p.tau0);
    ASSERT_EQ(ctl.position(), int64_t(t));
    const double threshold = ctl.next_threshold();  // known before the token's entropy
    auto got = ctl.decide(z.data(), kVocab);
    SCOPED_TRACE("t " + std::to_string(t) + " w " + std::to_string(window));
    EXPECT_NEAR(got.entropy, want.entropy, 1e-12);
    EXPECT_NEAR(got.h_step, want.h_step, 1e-12);
    EXPECT_NEAR(got.h_bar, want.h_bar, 1e-12);
    ASSERT_EQ(got.temperature, want.temperature);
    EXPECT_EQ(got.uncertain_step, want.h_step > want.h_bar);
    EXPECT_NEAR(threshold, t == 0 || want.h_step <= want.h_bar ? p.tau0 : want.h_step, 1e-12);
    ASSERT_EQ(got.temperature, got.entropy >= threshold ? p.t_high : p.t_low);  // the GPU's form of the rule
    cov.branch[got.uncertain_step][got.temperature == p.t_high]++;
    if (t > 0 && t - t0 >= size_t(window)) cov.step_mean++;
    if (t0 > 0 && t - t0 < size_t(window) && t > t0 && t >= size_t(window)) cov.window_cross++;

    int32_t tok = next_token(rng, boundary_rate);
    ctl.accept(tok);
    texts.push_back(token_text(tok));
    // track the step start for the coverage counters only (the reference finds it itself)
    bool starts = texts.back().find("\n\n") != std::string::npos ||
                  (texts.size() >= 2 && texts.back() == "\n" && texts[texts.size() - 2] == "\n");
    if (starts) t0 = t + 1;
  }
}

}  // namespace

TEST(Reset, MatchesFromScratchReference) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Coverage cov;
  for (int window : {1, 2, 5, 32})
    for (int seq = 0; seq < 6; ++seq) check_sequence(rng, window, cov);
  // the comparison must have gone through every branch of the rule
  for (int u = 0; u < 2; ++u)
    for (int h = 0; h < 2; ++h) EXPECT_GT(cov.branch[u][h], 0) << "uncertain " << u << " high " << h;
  EXPECT_GT(cov.step_mean, 0);
  EXPECT_GT(cov.window_cross, 0);
}

TEST(Reset, FirstTokenIsAConfidentStep) {
  nibble::ResetParams p;
  p.tau0 = 1.0;
  std::vector<float> flat(kVocab, 0.0f);  // H = log 40 > tau0
  nibble::ResetController a(p, token_text);
  auto d = a.decide(flat.data(), kVocab);
  EXPECT_NEAR(d.entropy, std::log(double(kVocab)), 1e-12);
  EXPECT_EQ(d.h_step, d.entropy);
  EXPECT_EQ(d.h_bar, d.h_step);
  EXPECT_FALSE(d.uncertain_step);
  EXPECT_EQ(d.temperature, p.t_high);
  std::vector<float> spike(kVocab, -30.0f);
  spike[7] = 0;  // H ~ 0 < tau0
  nibble::ResetController b(p, token_text);
  EXPECT_EQ(b.decide(spike.data(), kVocab).temperature, p.t_low);
}

TEST(Reset, StepBoundaries) {
  // Steps start after "\n\n" anywhere in a token, or after two tokens that are exactly "\n";
  // " \n" and "\n " are not "\n". With w = 1, H_step at a step's first token is H_{t-1} (the
  // window) and afterwards the mean over the step, so the step starts show in H_step.
  const std::vector<int32_t> toks = {9, 0, 3, 0, 0, 9, 9, 1, 9, 2, 9, 9};
  const std::vector<size_t> step_start = {0, 0, 0, 0, 0, 5, 5, 5, 8, 8, 10, 10};
  nibble::ResetParams p;
  p.window = 1;
  nibble::ResetController c(p, token_text);
  std::vector<double> H;
  for (size_t t = 0; t < toks.size(); ++t) {
    // m equal logits, the rest masked: H_t = log m, a different value at every t
    const int m = int(t) + 2;
    std::vector<float> z(kVocab, -INFINITY);
    for (int i = 0; i < m; ++i) z[size_t(i)] = 0.5f;
    H.push_back(std::log(double(m)));
    auto d = c.decide(z.data(), kVocab);
    double want = H[t];
    if (t > 0 && t == step_start[t]) want = H[t - 1];
    if (t > step_start[t]) {
      want = 0;
      for (size_t i = step_start[t]; i < t; ++i) want += H[i];
      want /= double(t - step_start[t]);
    }
    EXPECT_NEAR(d.h_step, want, 1e-12) << "t " << t;
    c.accept(toks[t]);
  }
}

TEST(Reset, EntropyEqualToThresholdGetsHighTemperature) {
  std::vector<float> spike(kVocab, -30.0f), flat(kVocab, 0.0f);
  spike[3] = 0;
  // confident step: H_t == tau0 exactly
  nibble::ResetParams p;
  p.window = 1;
  p.tau0 = nibble::entropy_nats(flat.data(), kVocab);
  nibble::ResetController a(p, token_text);
  auto d0 = a.decide(flat.data(), kVocab);
  EXPECT_FALSE(d0.uncertain_step);
  EXPECT_EQ(d0.temperature, p.t_high);
  // uncertain step: low H_0, high H_1, then "\n\n" so token 2 starts a step whose window
  // estimate is H_1 > mean(H_0, H_1); token 2 repeats token 1's logits, so H_2 == H_step
  p.tau0 = 100;  // keep the confident branch out of it
  nibble::ResetController b(p, token_text);
  b.decide(spike.data(), kVocab);
  b.accept(9);
  b.decide(flat.data(), kVocab);
  b.accept(1);
  auto d2 = b.decide(flat.data(), kVocab);
  EXPECT_TRUE(d2.uncertain_step);
  EXPECT_EQ(d2.entropy, d2.h_step);
  EXPECT_EQ(d2.temperature, p.t_high);
}

TEST(Reset, MisuseAndBadParameters) {
  std::vector<float> z(kVocab, 0.0f);
  nibble::ResetController c({}, token_text);
  EXPECT_THROW(c.accept(5), nibble::Error);
  c.decide(z.data(), kVocab);
  EXPECT_THROW(c.decide(z.data(), kVocab), nibble::Error);
  EXPECT_THROW(nibble::ResetController({}, nibble::TokenTextFn{}), nibble::Error);
  for (auto bad : {+[](nibble::ResetParams& p) { p.t_low = 0; },
                   +[](nibble::ResetParams& p) { p.t_high = -1; },
                   +[](nibble::ResetParams& p) { p.tau0 = NAN; },
                   +[](nibble::ResetParams& p) { p.window = 0; },
                   +[](nibble::ResetParams& p) { p.top_p = 0; }}) {
    nibble::ResetParams p;
    bad(p);
    EXPECT_THROW(nibble::ResetController(p, token_text), nibble::Error);
  }
}

TEST(Reset, SamplerUsesTheDecidedTemperatureAndTopP) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  nibble::SamplerConfig cfg;
  cfg.kind = nibble::SamplerKind::Reset;
  cfg.seed = rng();
  cfg.reset.window = 4;
  cfg.reset.tau0 = 1.5;
  nibble::Sampler s(cfg, token_text);
  nibble::ResetController shadow(cfg.reset, token_text);  // fed the same tokens
  for (int t = 0; t < 300; ++t) {
    auto z = random_logits(rng);
    int32_t tok = s.sample(z.data(), kVocab);
    ASSERT_TRUE(s.last_reset_decision().has_value());
    auto want = shadow.decide(z.data(), kVocab);
    EXPECT_EQ(s.last_reset_decision()->temperature, want.temperature) << t;
    shadow.accept(tok);
    // the draw lies inside top-p(0.95) of softmax(z / T)
    auto p = ref::softmax(z, want.temperature);
    EXPECT_TRUE(ref::top_p(p, cfg.reset.top_p).count(tok)) << "t " << t << " token " << tok;
  }
}

// The GPU path hands ReSET an entropy computed elsewhere: decide_entropy must take the same
// decisions as decide() on the logits, and reject entropies that cannot be.
TEST(Reset, DecideEntropyEqualsDecideOnTheLogits) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  nibble::ResetController a(nibble::ResetParams{}, token_text), b(nibble::ResetParams{}, token_text);
  for (int t = 0; t < 300; ++t) {
    const auto z = random_logits(rng);
    const auto da = a.decide(z.data(), kVocab);
    const auto db = b.decide_entropy(nibble::entropy_nats(z.data(), kVocab));
    ASSERT_EQ(da.temperature, db.temperature) << "t " << t;
    ASSERT_EQ(da.uncertain_step, db.uncertain_step) << "t " << t;
    EXPECT_EQ(da.h_step, db.h_step);
    const int32_t tok = next_token(rng, 0.1);
    a.accept(tok), b.accept(tok);
  }
  nibble::ResetController c(nibble::ResetParams{}, token_text);
  EXPECT_THROW(c.decide_entropy(-0.5), nibble::Error);
  EXPECT_THROW(c.decide_entropy(std::nan("")), nibble::Error);
}

// Perplexity protocol: windows, tail dropped, token 0 unscored, against a direct computation; and
// (slow) the house model's reference perplexity from Hugging Face transformers.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "nibble/error.h"
#include "nibble/paths.h"
#include "nibble/perplexity.h"

namespace nibble {
namespace {

std::filesystem::path house_dir() { return data_dir() / "models" / "house-49m"; }

const Model& house() {
  static const std::unique_ptr<Model> m = Model::load(house_dir());
  return *m;
}

// NLL of tokens 1..n-1 of a window from one all-logits forward, log-softmax in double.
double direct_window_nll(const Model& m, std::span<const int32_t> win) {
  Session s(m, int(win.size()));
  const std::vector<float> logits = s.forward(win, true);
  const size_t V = logits.size() / win.size();
  double nll = 0;
  for (size_t t = 0; t + 1 < win.size(); ++t) {
    const float* row = logits.data() + t * V;
    double mx = row[0], sum = 0;
    for (size_t i = 1; i < V; ++i) mx = std::max(mx, double(row[i]));
    for (size_t i = 0; i < V; ++i) sum += std::exp(double(row[i]) - mx);
    nll += std::log(sum) + mx - row[win[t + 1]];
  }
  return nll;
}

TEST(Perplexity, MatchesDirectComputationOverWindows) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> tok(0, house().config().vocab_size - 1);
  const int ctx = 12;
  std::vector<int32_t> ids(3 * ctx + 5);  // three windows and a tail that must be dropped
  for (int32_t& t : ids) t = tok(gen);
  PerplexityOptions opt;
  opt.ctx = ctx;
  opt.progress = false;
  const PerplexityResult r = perplexity(house(), ids, opt);
  EXPECT_EQ(r.windows, 3);
  EXPECT_EQ(r.scored_tokens, 3 * (ctx - 1));
  EXPECT_EQ(r.total_tokens, int64_t(ids.size()));
  double nll = 0;
  for (int w = 0; w < 3; ++w) nll += direct_window_nll(house(), std::span(ids).subspan(size_t(w * ctx), ctx));
  EXPECT_NEAR(r.nll_sum, nll, 1e-6 * nll);
  EXPECT_NEAR(r.ppl, std::exp(nll / (3 * (ctx - 1))), 1e-6 * r.ppl);
  opt.max_windows = 2;  // a window limit takes the first windows
  const PerplexityResult r2 = perplexity(house(), ids, opt);
  EXPECT_EQ(r2.windows, 2);
  EXPECT_NEAR(r2.nll_sum, nll - direct_window_nll(house(), std::span(ids).subspan(2 * ctx, ctx)),
              1e-6 * nll);
}

TEST(Perplexity, DefaultContextAndBadInput) {
  EXPECT_EQ(default_ppl_context(house().config()), 1024);  // house model: max 2048, evaluated at 1024
  std::vector<int32_t> ids(10, 1);
  PerplexityOptions opt;
  opt.progress = false;
  opt.ctx = 11;
  EXPECT_THROW(perplexity(house(), ids, opt), Error);  // shorter than one window
  opt.ctx = 1;
  EXPECT_THROW(perplexity(house(), ids, opt), Error);
  EXPECT_THROW(perplexity_of_file(house(), data_dir() / "no-such-text.txt", opt), Error);
}

// transformers' fp32 number for the first 16 windows of WikiText-2 at ctx 1024, within 0.1%.
TEST(PerplexitySlow, HouseFirst16WindowsMatchesTransformers) {
  std::ifstream f(house_dir() / "reference.json");
  const double want = nlohmann::json::parse(f)["ppl_fp32_ctx1024_first16windows"].get<double>();
  PerplexityOptions opt;
  opt.ctx = 1024;
  opt.max_windows = 16;
  opt.progress = false;
  const PerplexityResult r =
      perplexity_of_file(house(), data_dir() / "text/wikitext-2-raw/wiki.test.gptq_join.txt", opt);
  EXPECT_EQ(r.windows, 16);
  EXPECT_NEAR(r.ppl, want, 1e-3 * want);
}

}  // namespace
}  // namespace nibble

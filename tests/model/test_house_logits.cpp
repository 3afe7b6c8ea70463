// The house model's FP32 logits against Hugging Face transformers (reference.json and the small
// fixture derived from it), and batched prefill against token-by-token decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "model/house_model.h"
#include "nibble/error.h"

namespace nibble {
namespace {

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  if (!f) throw std::runtime_error("cannot open " + p.string());
  return nlohmann::json::parse(f);
}

constexpr double kRelTol = 1e-4;

void expect_close(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, kRelTol * std::max(1.0, std::fabs(want))) << what;
}

// Top-k ids of a logits row, largest first.
std::vector<int> top_ids(const float* row, int V, int k) {
  std::vector<int> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return row[a] > row[b]; });
  idx.resize(size_t(k));
  return idx;
}

// Ids must agree in order except where the reference values are a near-tie.
void expect_top_ids(const float* row, int V, const std::vector<int>& want_ids,
                    const std::vector<double>& want_vals, const std::string& where) {
  const std::vector<int> got = top_ids(row, V, int(want_ids.size()));
  for (size_t i = 0; i < want_ids.size(); ++i) {
    if (got[i] == want_ids[i]) continue;
    const bool tie = (i > 0 && want_vals[i - 1] - want_vals[i] < 1e-3) ||
                     (i + 1 < want_vals.size() && want_vals[i] - want_vals[i + 1] < 1e-3);
    EXPECT_TRUE(tie) << where << ": rank " << i << " id " << got[i] << ", want " << want_ids[i];
  }
}

class HouseLogits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const Model& m = test::house_model();
    ref_ = new nlohmann::json(read_json(test::house_dir() / "reference.json"));
    const std::vector<int32_t> ids = (*ref_)["logits_prompt_ids"].get<std::vector<int32_t>>();
    Session s(m, 64);
    logits_ = new std::vector<float>(s.forward(ids, true));
  }
  static void TearDownTestSuite() {
    delete ref_;
    delete logits_;
  }
  static const float* row(int pos) { return logits_->data() + int64_t(pos) * V(); }
  static int V() { return test::house_model().config().vocab_size; }
  static nlohmann::json* ref_;
  static std::vector<float>* logits_;
};
nlohmann::json* HouseLogits::ref_ = nullptr;
std::vector<float>* HouseLogits::logits_ = nullptr;

TEST_F(HouseLogits, Top10AtEachOfThe64Positions) {
  ASSERT_EQ(logits_->size(), size_t(64) * V());
  for (int p = 0; p < 64; ++p) {
    const auto ids = (*ref_)["logits_top10_ids"][p].get<std::vector<int>>();
    const auto vals = (*ref_)["logits_top10_values"][p].get<std::vector<double>>();
    const std::string where = "position " + std::to_string(p);
    for (size_t i = 0; i < ids.size(); ++i)
      expect_close(row(p)[ids[i]], vals[i], where + " id " + std::to_string(ids[i]));
    expect_top_ids(row(p), V(), ids, vals, where);
  }
}

TEST_F(HouseLogits, AllLogitsAtTheLastPosition) {
  const auto want = (*ref_)["logits_last_position_all"].get<std::vector<double>>();
  ASSERT_EQ(want.size(), size_t(V()));
  double max_err = 0;
  for (int i = 0; i < V(); ++i) {
    expect_close(row(63)[i], want[size_t(i)], "last position id " + std::to_string(i));
    max_err = std::max(max_err, std::fabs(row(63)[i] - want[size_t(i)]));
  }
  RecordProperty("max_abs_error", std::to_string(max_err));
}

TEST_F(HouseLogits, CheckedInFixture) {
  const nlohmann::json fx =
      read_json(std::filesystem::path(NIBBLE_SOURCE_DIR) / "tests/model/fixtures/house49m_logits.json");
  ASSERT_EQ(fx["prompt_ids"], (*ref_)["logits_prompt_ids"]);
  const auto positions = fx["positions"].get<std::vector<int>>();
  for (size_t i = 0; i < positions.size(); ++i) {
    const auto ids = fx["top10_ids"][i].get<std::vector<int>>();
    const auto vals = fx["top10_values"][i].get<std::vector<double>>();
    for (size_t j = 0; j < ids.size(); ++j)
      expect_close(row(positions[i])[ids[j]], vals[j], "fixture position " + std::to_string(positions[i]));
  }
  const auto ids = fx["last_ids"].get<std::vector<int>>();
  const auto vals = fx["last_values"].get<std::vector<double>>();
  for (size_t j = 0; j < ids.size(); ++j) expect_close(row(63)[ids[j]], vals[j], "fixture last");
}

TEST(HouseSession, PrefillEqualsTokenByToken) {
  const Model& m = test::house_model();
  const int V = m.config().vocab_size;
  const std::vector<int32_t> ids = m.tokenizer().encode("The old house stood empty.");
  ASSERT_GE(ids.size(), 5u);
  Session batch(m, 32), step(m, 32);
  const std::vector<float> all = batch.forward(ids, true);
  for (size_t t = 0; t < ids.size(); ++t) {
    const std::vector<float> one = step.forward(std::span(ids).subspan(t, 1));
    ASSERT_EQ(one.size(), size_t(V));
    for (int i = 0; i < V; ++i)
      ASSERT_NEAR(one[size_t(i)], all[t * V + size_t(i)], 1e-4 * std::max(1.0f, std::fabs(one[size_t(i)])))
          << "token " << t << " id " << i;
  }
  EXPECT_EQ(step.position(), int(ids.size()));
  // A split prefill (two chunks) agrees as well, and reset starts over.
  step.reset();
  step.forward(std::span(ids).first(3));
  const std::vector<float> last = step.forward(std::span(ids).subspan(3));
  for (int i = 0; i < V; ++i)
    ASSERT_NEAR(last[size_t(i)], all[(ids.size() - 1) * V + size_t(i)], 1e-4 * std::max(1.0f, std::fabs(last[size_t(i)])));
}

TEST(HouseSessionSlow, GreedyContinuationMatchesReference) {
  const Model& m = test::house_model();
  const nlohmann::json ref = read_json(test::house_dir() / "reference.json");
  const auto want = ref["greedy_ids"].get<std::vector<int32_t>>();
  const std::vector<int32_t> prompt = m.tokenizer().encode(ref["greedy_prompt"].get<std::string>());
  ASSERT_LT(prompt.size(), want.size());
  for (size_t i = 0; i < prompt.size(); ++i) ASSERT_EQ(prompt[i], want[i]);
  Session s(m, 64);
  std::vector<float> logits = s.forward(prompt);
  for (size_t t = prompt.size(); t < want.size(); ++t) {
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ASSERT_EQ(next, want[t]) << "greedy step " << t - prompt.size();
    logits = s.forward(std::span(&next, 1));
  }
}

TEST(HouseSession, OverflowAndBadTokenThrow) {
  const Model& m = test::house_model();
  Session s(m, 4);
  const std::vector<int32_t> five = {1, 2, 3, 4, 5};
  EXPECT_THROW(s.forward(five), Error);
  EXPECT_EQ(s.position(), 0);
  const std::vector<int32_t> bad = {1, m.config().vocab_size};
  EXPECT_THROW(s.forward(bad), Error);
  const std::vector<int32_t> neg = {-1};
  EXPECT_THROW(s.forward(neg), Error);
}

}  // namespace
}  // namespace nibble

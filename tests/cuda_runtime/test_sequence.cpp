// make_sequence: the GPU behind nibble::Sequence, as `--device cuda` uses it for perplexity.
#include <gtest/gtest.h>

#include "cuda_runtime/compare.h"
#include "cuda_runtime/models.h"
#include "nibble/cuda/runtime.h"
#include "nibble/perplexity.h"

namespace nibble::cuda::test {
namespace {

TEST(DeviceSequence, PerplexityMatchesTheCpu) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("model seed " + std::to_string(model_seed()) + ", text seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  const auto m = load(llama_model(688), "nvfp4-razer");
  const std::vector<int32_t> ids = random_tokens(gen, 3 * 160, m->config().vocab_size);
  PerplexityOptions opt;
  opt.ctx = 160;
  opt.progress = false;
  const PerplexityResult cpu = perplexity(*m, ids, opt);
  DeviceModel dm(*m);
  opt.make_sequence = [&dm](int ctx) { return make_sequence(dm, ctx); };
  const PerplexityResult gpu = perplexity(*m, ids, opt);
  EXPECT_EQ(gpu.scored_tokens, cpu.scored_tokens);
  EXPECT_NEAR(gpu.ppl, cpu.ppl, 2e-3 * cpu.ppl);  // the bar: within 0.2%
}

TEST(DeviceSequence, DecodeStepsEqualOneLongerPrefill) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("model seed " + std::to_string(model_seed()) + ", prompt seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  const auto m = load(qwen3_model(), "mxfp4");
  DeviceModel dm(*m);
  const std::vector<int32_t> ids = random_tokens(gen, 12, m->config().vocab_size);
  auto a = make_sequence(dm, 16), b = make_sequence(dm, 16);
  const std::vector<float> whole = a->forward(ids, true);
  std::vector<float> stepped = b->forward(std::span<const int32_t>(ids).first(9), true);
  for (size_t i = 9; i < ids.size(); ++i) {  // single tokens take the decode (graph) path
    const std::vector<float> l = b->forward(std::span<const int32_t>(ids).subspan(i, 1));
    stepped.insert(stepped.end(), l.begin(), l.end());
  }
  EXPECT_LE(diff(stepped, whole).rel_rms, 5e-3);
  EXPECT_EQ(b->position(), 12);
  b->reset();
  EXPECT_EQ(b->position(), 0);
  EXPECT_EQ(b->max_context(), 16);
}

}  // namespace
}  // namespace nibble::cuda::test

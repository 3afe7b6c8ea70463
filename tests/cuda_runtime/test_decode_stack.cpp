// The whole-stack decode kernel (every layer of a one-row step in one launch; Batch::set_decode_stack,
// off by default: experimental) against the kernel-per-op step it replaces, on the same tokens:
// prompts short and long (one key chunk per KV head, and the most), head dims 64 and 128, down rows
// split over several ring slots, with and without CUDA graphs, on every SM and on 3 CTAs (each warp
// then takes many units of a GEMV and runs ahead of the ring's producer). Its GEMVs add the parts
// of a row in another order than the per-op kernels and its attention merges the softmax in
// another, so the logits are compared within a tolerance, not bit for bit. Models it does not take
// say why.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda/format_name.h"
#include "cuda_runtime/compare.h"
#include "cuda_runtime/models.h"
#include "nibble/cuda/runtime.h"

namespace nibble::cuda::test {
namespace {

// Prefills slot 0 with `prompt` tokens, then decodes the given tokens one step at a time: every
// step's logits.
std::vector<std::vector<float>> forced_run(Batch& b, const std::vector<int32_t>& prompt,
                                           const std::vector<int32_t>& steps) {
  b.reset(0);
  b.prefill(0, prompt);
  std::vector<std::vector<float>> out;
  for (int32_t t : steps) out.push_back(b.decode(std::vector<int>{0}, std::vector<int32_t>{t}));
  return out;
}

class DecodeStackTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeStackTest, MatchesTheKernelPerOpStep) {
  for (const TinyHf* hf : {&llama_model(768), &llama_wide_model()}) {
    const auto m = load(*hf, GetParam());
    const int V = m->config().vocab_size;
    DeviceModel dm(*m);
    std::mt19937 gen(model_seed());
    for (bool graphs : {true, false}) {
      Batch b(dm, {2, 1024, graphs});
      std::string why;
      EXPECT_FALSE(b.runs_decode_stack(1, &why));  // experimental: off by default
      EXPECT_EQ(why, "turned off");
      b.set_decode_stack(true);
      ASSERT_TRUE(b.runs_decode_stack(1, &why)) << why;
      EXPECT_FALSE(b.runs_decode_stack(2, &why));
      EXPECT_EQ(why, "more than one row");
      for (auto [prompt, ctas] : {std::pair{5, 0}, std::pair{700, 0}, std::pair{300, 3}}) {
        SCOPED_TRACE("head_dim " + std::to_string(hf->spec().head_dim) + (graphs ? ", graphs" : ", no graphs") +
                     ", prompt " + std::to_string(prompt) + ", ctas " + std::to_string(ctas));
        const std::vector<int32_t> p = random_tokens(gen, prompt, V), steps = random_tokens(gen, 6, V);
        b.set_decode_stack(true, ctas);
        const auto fused = forced_run(b, p, steps);
        b.set_decode_stack(false);
        ASSERT_FALSE(b.runs_decode_stack(1, &why));
        EXPECT_EQ(why, "turned off");
        const auto per_op = forced_run(b, p, steps);
        for (size_t s = 0; s < steps.size(); ++s) {
          const Diff e = diff(fused[s], per_op[s]);
          EXPECT_LT(e.rel_rms, 2e-3) << "step " << s << ", max |diff| " << e.max_abs;
          expect_same_winner(fused[s], per_op[s], e.max_abs);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, DecodeStackTest, ::testing::Values("int4-g128", "fp4-g128"), FormatName());

TEST(DecodeStackNot, OtherFormatsNormsBiasesAndE4m3CachesSayWhy) {
  auto reason = [](const TinyHf& hf, const std::string& format, const std::string& kv = "") {
    const auto m = load(hf, format, "", kv);
    DeviceModel dm(*m);
    Batch b(dm, {1, 64, true, kv_type(m->options().kv_cache)});
    std::string why;
    EXPECT_FALSE(b.runs_decode_stack(1, &why));
    return why;
  };
  EXPECT_NE(reason(llama_model(768), "nvfp4").find("no whole-stack kernel"), std::string::npos);
  EXPECT_NE(reason(qwen3_model(), "int4-g128").find("q/k norms"), std::string::npos);
  EXPECT_NE(reason(qwen2_model(), "int4-g128").find("RoPE pair order"), std::string::npos);
  EXPECT_NE(reason(llama_model(768), "int4-g128", "fp8-e4m3").find("not FP16"), std::string::npos);
  // 688 is not a multiple of the group size: down has no int4-g128 GEMV layout
  EXPECT_FALSE(reason(llama_model(688), "int4-g128").empty());
}

}  // namespace
}  // namespace nibble::cuda::test

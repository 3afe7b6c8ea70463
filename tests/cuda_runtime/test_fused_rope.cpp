// RoPE and the KV-cache store inside the stacked q/k/v GEMV (Batch::set_fused_rope_store, on by
// default) decode the same bits as ops::qk_norm_rope_store after it, step after step, at one row
// and at three (slots at different positions), with and without CUDA graphs. Models with q/k
// norms (Qwen3), q/k/v biases (Qwen2) or an E4M3 cache do not fuse.
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

// Prefills slots 0..2 with prompts of different lengths, then greedy decode steps of `rows` slots
// (1 or 3): every step's logits.
std::vector<std::vector<float>> decode_run(Batch& b, int V, int rows, int steps) {
  std::mt19937 gen(model_seed());
  std::vector<int32_t> next;
  for (int s = 0; s < rows; ++s) {
    b.reset(s);
    next.push_back(argmax_of(b.prefill(s, random_tokens(gen, 4 + 9 * s, V))));
  }
  std::vector<int> slots;
  for (int s = 0; s < rows; ++s) slots.push_back(s);
  std::vector<std::vector<float>> out;
  for (int step = 0; step < steps; ++step) {
    std::vector<float> l = b.decode(slots, next);
    for (int s = 0; s < rows; ++s) next[size_t(s)] = argmax_of(std::span<const float>(l).subspan(size_t(s) * V, size_t(V)));
    out.push_back(std::move(l));
  }
  return out;
}

class FusedRopeStore : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedRopeStore, SameBitsAsTheRopeKernel) {
  const auto m = load(llama_model(768), GetParam());
  const int V = m->config().vocab_size;
  DeviceModel dm(*m);
  for (bool graphs : {true, false}) {
    Batch b(dm, {3, 64, graphs});
    for (int rows : {1, 3}) {
      SCOPED_TRACE(std::string(graphs ? "graphs" : "no graphs") + ", rows " + std::to_string(rows));
      b.set_fused_rope_store(true);
      // FP16 above one row runs cuBLAS over the stack (its split puts the pairs back), not the GEMV
      ASSERT_EQ(b.fuses_rope_store(rows), GetParam() != "fp16" || rows == 1);
      const auto fused = decode_run(b, V, rows, 5);
      b.set_fused_rope_store(false);
      ASSERT_FALSE(b.fuses_rope_store(rows));
      const auto separate = decode_run(b, V, rows, 5);
      ASSERT_EQ(fused.size(), separate.size());
      for (size_t s = 0; s < fused.size(); ++s) EXPECT_EQ(fused[s], separate[s]) << "step " << s;
    }
  }
}

// fp16: the FP16 GEMV at one row, cuBLAS over the stack then the split (which puts the pairs back
// in place) at three; the packed formats: their GEMVs at both.
INSTANTIATE_TEST_SUITE_P(Formats, FusedRopeStore, ::testing::Values("int4-g128", "nvfp4", "razer-fp4-g128", "fp16"),
                         FormatName());

TEST(FusedRopeStoreNot, NormsBiasesAndE4m3CachesKeepTheRopeKernel) {
  for (const TinyHf* hf : {&qwen3_model(), &qwen2_model()}) {
    const auto m = load(*hf, "int4-g128");
    DeviceModel dm(*m);
    Batch b(dm, {1, 64, true});
    EXPECT_FALSE(b.fuses_rope_store(1));
  }
  const auto m = load(llama_model(768), "int4-g128", "", "fp8-e4m3");
  DeviceModel dm(*m);
  Batch b(dm, {1, 64, true, kv_type(m->options().kv_cache)});
  EXPECT_FALSE(b.fuses_rope_store(1));
}

}  // namespace
}  // namespace nibble::cuda::test

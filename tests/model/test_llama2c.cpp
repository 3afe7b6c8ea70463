// A real llama2.c checkpoint (aidreams260K) through Model::load, against the float64 reference
// forward pass on the same converted tensors; and its quantized save / reload.
#include <gtest/gtest.h>

#include <cmath>

#include "model/tiny_model.h"
#include "nibble/llama2c.h"
#include "nibble/model.h"
#include "nibble/paths.h"

namespace nibble {
namespace {

std::filesystem::path ckpt() { return data_dir() / "models" / "aidreams260K-llama2c" / "aidreams260K.bin"; }

TEST(Llama2c, ForwardMatchesReference) {
  const auto m = Model::load(ckpt());  // finds tok512.bin beside the checkpoint
  const Llama2cModel src = load_llama2c(ckpt());
  const ModelConfig& c = src.config;
  test::TinySpec spec;
  spec.hidden = c.hidden_size;
  spec.inter = c.intermediate_size;
  spec.layers = c.num_layers;
  spec.heads = c.num_heads;
  spec.kv_heads = c.num_kv_heads;
  spec.head_dim = c.head_dim;
  spec.vocab = c.vocab_size;
  spec.tied = c.tie_word_embeddings;
  spec.theta = c.rope_theta;
  spec.eps = c.rms_norm_eps;
  test::Tensors tensors;
  for (const auto& [name, t] : src.tensors) tensors[name] = t.data;
  const std::vector<int32_t> ids = m->tokenizer().encode("Once upon a time, there was a little girl.");
  ASSERT_GT(ids.size(), 4u);
  const std::vector<double> want =
      test::reference_forward(spec, tensors, std::vector<int>(ids.begin(), ids.end()));
  Session s(*m, 32);
  const std::vector<float> got = s.forward(ids, true);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::fabs(want[i]))) << "logit " << i;
}

TEST(Llama2c, QuantizedSaveKeepsTheTokenizer) {
  LoadOptions o;
  o.weight_format = "nvfp4";
  const auto q = Model::load(ckpt(), o);
  const std::filesystem::path out = test::fresh_temp_dir("l2c");
  q->save_quantized(out);
  const auto r = Model::load(out);
  const std::vector<int32_t> ids = q->tokenizer().encode("The cat sat.");
  EXPECT_EQ(r->tokenizer().encode("The cat sat."), ids);
  Session a(*q, 16), b(*r, 16);
  EXPECT_EQ(a.forward(ids), b.forward(ids));
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace nibble

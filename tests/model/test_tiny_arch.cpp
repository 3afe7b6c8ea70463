// Random tiny Llama / Qwen2 / Qwen3 models against the float64 reference forward pass, plus load
// errors that must name the tensor at fault.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "model/tiny_model.h"
#include "nibble/error.h"
#include "nibble/model.h"
#include "nibble/paths.h"
#include "nibble/safetensors.h"

namespace nibble {
namespace {

using test::tiny_options;

std::vector<int> random_ids(std::mt19937& gen, int n, int vocab) {
  std::uniform_int_distribution<int> u(0, vocab - 1);
  std::vector<int> ids(static_cast<size_t>(n));
  for (int& i : ids) i = u(gen);
  return ids;
}

void check_against_reference(const test::TinySpec& spec) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(spec.arch + " seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  const test::TinyModel tm = test::make_tiny_model(spec, gen);
  const auto m = Model::load(tm.dir, tiny_options());
  const std::vector<int> ids = random_ids(gen, 9, spec.vocab);
  const std::vector<double> want = test::reference_forward(spec, tm.tensors, ids);
  Session s(*m, 16);
  const std::vector<int32_t> ids32(ids.begin(), ids.end());
  const std::vector<float> got = s.forward(ids32, true);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::fabs(want[i])))
        << "position " << i / size_t(spec.vocab) << " id " << i % size_t(spec.vocab);
}

TEST(TinyArch, LlamaGqaUntied) { check_against_reference({}); }

TEST(TinyArch, LlamaLlama3RopeTied) {
  test::TinySpec s;
  s.llama3_rope = true;
  s.tied = true;
  s.theta = 500000.0;
  check_against_reference(s);
}

TEST(TinyArch, Qwen2Bias) {
  test::TinySpec s;
  s.arch = "Qwen2ForCausalLM";
  s.tied = true;
  check_against_reference(s);
}

TEST(TinyArch, Qwen3QkNormWideHeads) {
  test::TinySpec s;
  s.arch = "Qwen3ForCausalLM";
  s.head_dim = 16;  // heads * head_dim != hidden
  s.kv_heads = 1;
  check_against_reference(s);
}

// Rewrites the tiny model's safetensors with one tensor changed (or dropped when shape is empty).
void rewrite(const test::TinyModel& tm, const std::string& name, std::vector<int64_t> shape) {
  SafetensorsWriter w;
  for (const auto& [n, v] : tm.tensors) {
    if (n != name) {
      w.add_f32(n, tm.shapes.at(n), v.data());
    } else if (!shape.empty()) {
      int64_t k = 1;
      for (int64_t d : shape) k *= d;
      std::vector<float> z(size_t(k), 0.5f);
      w.add_f32(n, shape, z.data());
    }
  }
  w.write(tm.dir / "model.safetensors");
}

std::string load_error(const test::TinyModel& tm) {
  try {
    Model::load(tm.dir, tiny_options());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TinyArchErrors, MissingTensorIsNamed) {
  std::mt19937 gen(std::random_device{}());
  const test::TinyModel tm = test::make_tiny_model({}, gen);
  rewrite(tm, "model.layers.1.mlp.up_proj.weight", {});
  EXPECT_NE(load_error(tm).find("model.layers.1.mlp.up_proj.weight"), std::string::npos)
      << load_error(tm);
}

TEST(TinyArchErrors, WrongShapeIsNamed) {
  std::mt19937 gen(std::random_device{}());
  const test::TinyModel tm = test::make_tiny_model({}, gen);
  rewrite(tm, "model.layers.0.self_attn.k_proj.weight", {32, 32});
  const std::string e = load_error(tm);
  EXPECT_NE(e.find("model.layers.0.self_attn.k_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[32, 32]"), std::string::npos) << e;
  rewrite(tm, "model.norm.weight", {31});
  EXPECT_NE(load_error(tm).find("model.norm.weight"), std::string::npos) << load_error(tm);
}

TEST(TinyArchErrors, UnknownFormatsAreRejected) {
  std::mt19937 gen(std::random_device{}());
  const test::TinyModel tm = test::make_tiny_model({}, gen);
  LoadOptions o = tiny_options();
  o.weight_format = "fp5-bogus";
  EXPECT_THROW(Model::load(tm.dir, o), Error);
  o.weight_format = "";
  o.act_format = "fp5-bogus";
  EXPECT_THROW(Model::load(tm.dir, o), Error);
  EXPECT_THROW(Model::load(tm.dir / "nope", tiny_options()), Error);
}

}  // namespace
}  // namespace nibble

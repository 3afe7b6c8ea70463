// config.json parsing: the supported architectures, both RoPE spellings, llama3 scaling, and
// clear errors for unknown architectures, missing / ill-typed fields and inconsistent values.
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "nibble/model_config.h"
#include "nibble/paths.h"

using io_test::expect_error;
using io_test::TempDir;
using nibble::ModelConfig;
using json = nlohmann::json;

namespace {

// A small Llama config with random but consistent sizes.
json base_config(io_test::Rng& rng) {
  const int kv = rng.uniform(1, 4), heads = kv * rng.uniform(1, 4), head_dim = 2 * rng.uniform(4, 64);
  return json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", heads * head_dim},
              {"intermediate_size", rng.uniform(1, 5000)},
              {"num_hidden_layers", rng.uniform(1, 40)},
              {"num_attention_heads", heads},
              {"num_key_value_heads", kv},
              {"vocab_size", rng.uniform(100, 200000)},
              {"max_position_embeddings", 4096},
              {"rms_norm_eps", 1e-6},
              {"rope_theta", 500000.0},
              {"bos_token_id", 1},
              {"eos_token_id", 2},
              {"tie_word_embeddings", false},
              {"torch_dtype", "bfloat16"}};
}

ModelConfig load_via_file(const json& j, const TempDir& dir) {
  io_test::write_text(dir / "config.json", j.dump(2));
  return ModelConfig::load(dir.path());
}

}  // namespace

TEST(ModelConfig, LlamaTopLevelRopeTheta) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  json j = base_config(rng);
  auto c = load_via_file(j, dir);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.hidden_size, j["hidden_size"].get<int>());
  EXPECT_EQ(c.intermediate_size, j["intermediate_size"].get<int>());
  EXPECT_EQ(c.num_layers, j["num_hidden_layers"].get<int>());
  EXPECT_EQ(c.num_heads, j["num_attention_heads"].get<int>());
  EXPECT_EQ(c.num_kv_heads, j["num_key_value_heads"].get<int>());
  EXPECT_EQ(c.head_dim, c.hidden_size / c.num_heads);
  EXPECT_EQ(c.vocab_size, j["vocab_size"].get<int>());
  EXPECT_EQ(c.max_positions, 4096);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_scaling.type, "");
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_FALSE(c.tie_word_embeddings || c.qk_norm || c.attention_bias);
  EXPECT_TRUE(c.quantization.is_null());
  EXPECT_EQ(c.raw, j);
  // Defaults: kv heads = heads; "dtype" wins over "torch_dtype".
  j.erase("num_key_value_heads");
  j["dtype"] = "float16";
  c = ModelConfig::from_json(j, "mem");
  EXPECT_EQ(c.num_kv_heads, c.num_heads);
  EXPECT_EQ(c.dtype, "float16");
}

TEST(ModelConfig, RopeParametersTransformers5) {
  io_test::Rng rng;
  json j = base_config(rng);
  j.erase("rope_theta");
  const double theta = rng.uniform(1000, 2000000);
  j["rope_parameters"] = {{"rope_theta", theta}, {"rope_type", "default"}};
  auto c = ModelConfig::from_json(j, "cfg");
  EXPECT_EQ(c.rope_theta, theta);
  EXPECT_EQ(c.rope_scaling.type, "");
}

TEST(ModelConfig, Llama3Scaling) {
  io_test::Rng rng;
  json j = base_config(rng);
  const json scaling = {{"rope_type", "llama3"},
                        {"factor", 32.0},
                        {"low_freq_factor", 1.0},
                        {"high_freq_factor", 4.0},
                        {"original_max_position_embeddings", 8192}};
  j["rope_scaling"] = scaling;  // transformers 4 spelling
  auto c = ModelConfig::from_json(j, "cfg");
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_positions, 8192);
  EXPECT_EQ(c.rope_theta, 500000.0);

  j.erase("rope_scaling");  // transformers 5 spelling: everything in rope_parameters
  j.erase("rope_theta");
  j["rope_parameters"] = scaling;
  j["rope_parameters"]["rope_theta"] = 123456.0;
  j["rope_parameters"]["factor"] = 8.0;
  c = ModelConfig::from_json(j, "cfg");
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_theta, 123456.0);

  j["rope_parameters"].erase("low_freq_factor");
  expect_error([&] { ModelConfig::from_json(j, "cfg.json"); }, {"cfg.json", "low_freq_factor"});
  j["rope_parameters"]["rope_type"] = "yarn";
  expect_error([&] { ModelConfig::from_json(j, "cfg.json"); }, {"cfg.json", "yarn"});
}

TEST(ModelConfig, Qwen2AndQwen3) {
  io_test::Rng rng;
  json j = base_config(rng);
  j["architectures"] = {"Qwen2ForCausalLM"};
  j.erase("model_type");
  auto c = ModelConfig::from_json(j, "cfg");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.model_type, "qwen2");

  // Qwen3-0.6B-like: head_dim given and not hidden / heads.
  j = base_config(rng);
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["model_type"] = "qwen3";
  j["hidden_size"] = 1024;
  j["num_attention_heads"] = 16;
  j["num_key_value_heads"] = 8;
  j["head_dim"] = 128;
  j["attention_bias"] = false;
  j["tie_word_embeddings"] = true;
  j["sliding_window"] = nullptr;
  c = ModelConfig::from_json(j, "cfg");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.sliding_window.has_value());
}

TEST(ModelConfig, MistralSlidingWindow) {
  io_test::Rng rng;
  json j = base_config(rng);
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 4096;
  auto c = ModelConfig::from_json(j, "cfg");
  ASSERT_TRUE(c.sliding_window.has_value());
  EXPECT_EQ(*c.sliding_window, 4096);
}

TEST(ModelConfig, EosListAndQuantization) {
  io_test::Rng rng;
  json j = base_config(rng);
  j["eos_token_id"] = {128001, 128008, 128009};
  j["bos_token_id"] = nullptr;
  j["quantization_config"] = {{"quant_method", "nibble"}, {"format", "nvfp4-razer"}};
  auto c = ModelConfig::from_json(j, "cfg");
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(c.quantization["format"], "nvfp4-razer");
  j["eos_token_id"] = json::array();
  expect_error([&] { ModelConfig::from_json(j, "cfg.json"); }, {"cfg.json", "eos_token_id"});
}

TEST(ModelConfig, UnknownArchitecture) {
  io_test::Rng rng;
  json j = base_config(rng);
  j["architectures"] = {"GPT2LMHeadModel"};
  expect_error([&] { ModelConfig::from_json(j, "x/config.json"); },
               {"x/config.json", "GPT2LMHeadModel", "LlamaForCausalLM", "MistralForCausalLM",
                "Qwen2ForCausalLM", "Qwen3ForCausalLM"});
  j.erase("architectures");
  expect_error([&] { ModelConfig::from_json(j, "x/config.json"); }, {"architectures", "missing"});
}

TEST(ModelConfig, MissingAndIllTypedFields) {
  io_test::Rng rng;
  TempDir dir;
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "vocab_size"}) {
    json j = base_config(rng);
    j.erase(field);
    const auto path = (dir / "config.json").string();
    expect_error([&] { load_via_file(j, dir); }, {path, field, "missing"});
    j[field] = "512";
    expect_error([&] { load_via_file(j, dir); }, {path, field, "integer"});
    j[field] = 12.5;
    expect_error([&] { load_via_file(j, dir); }, {path, field, "integer"});
  }
  json j = base_config(rng);
  j["tie_word_embeddings"] = "yes";
  expect_error([&] { ModelConfig::from_json(j, "c.json"); }, {"c.json", "tie_word_embeddings"});
  j = base_config(rng);
  j["rope_theta"] = "big";
  expect_error([&] { ModelConfig::from_json(j, "c.json"); }, {"c.json", "rope_theta"});
  j = base_config(rng);
  j["hidden_size"] = 1ll << 40;
  expect_error([&] { ModelConfig::from_json(j, "c.json"); }, {"c.json", "hidden_size", "range"});
}

TEST(ModelConfig, InconsistentValues) {
  io_test::Rng rng;
  json j = base_config(rng);
  j["hidden_size"] = j["num_attention_heads"].get<int>() * 8 + 1;
  j["num_attention_heads"] = j["num_attention_heads"].get<int>() * 2;  // heads >= 2: never divides
  expect_error([&] { ModelConfig::from_json(j, "c.json"); }, {"c.json", "hidden_size", "divisible"});
  j = base_config(rng);
  j["num_attention_heads"] = 6;
  j["num_key_value_heads"] = 4;
  j["hidden_size"] = 6 * 16;
  expect_error([&] { ModelConfig::from_json(j, "c.json"); }, {"c.json", "num_key_value_heads"});
  for (const char* field : {"hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size"}) {
    j = base_config(rng);
    j[field] = 0;
    expect_error([&] { ModelConfig::from_json(j, "c.json"); }, {"c.json", field, "positive"});
    j[field] = -3;
    expect_error([&] { ModelConfig::from_json(j, "c.json"); }, {"c.json", field, "positive"});
  }
}

TEST(ModelConfig, LoadErrors) {
  TempDir dir;
  expect_error([&] { ModelConfig::load(dir.path()); }, {"config.json", "cannot open"});
  io_test::write_text(dir / "config.json", "{ not json");
  expect_error([&] { ModelConfig::load(dir.path()); }, {"config.json", "JSON"});
  io_test::write_text(dir / "config.json", "[]");
  expect_error([&] { ModelConfig::load(dir / "config.json"); }, {"config.json", "object"});
}

TEST(ModelConfig, HouseModelAndSmolLM2) {
  const auto house = nibble::data_dir() / "models" / "house-49m";
  if (!std::filesystem::exists(house)) GTEST_SKIP() << house << " not present";
  auto c = ModelConfig::load(house);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden_size, 512);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_layers, 8);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, "bfloat16");

  auto s = ModelConfig::load(nibble::data_dir() / "models" / "smollm2-135m-instruct-tokenizer");
  EXPECT_EQ(s.rope_theta, 100000.0);  // top-level rope_theta, "rope_scaling": null
  EXPECT_EQ(s.num_kv_heads, 3);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.eos_token_id, 2);
}

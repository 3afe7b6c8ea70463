// TensorStore over single files and sharded directories, including the house model.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io_test_util.h"
#include "nibble/model_config.h"
#include "nibble/paths.h"
#include "nibble/safetensors.h"

using io_test::expect_error;
using io_test::TempDir;
using namespace nibble;

namespace {

void write_shard(const std::filesystem::path& p, const std::vector<std::string>& names,
                 io_test::Rng& rng) {
  SafetensorsWriter w;
  for (const auto& n : names) w.add(n, DType::BF16, {2, 3}, rng.bytes(12));
  w.set_metadata("shard", p.filename().string());
  w.write(p);
}

void write_index(const std::filesystem::path& dir, const nlohmann::json& weight_map) {
  io_test::write_text(dir / "model.safetensors.index.json",
                      nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
}

}  // namespace

TEST(TensorStore, SingleFile) {
  io_test::Rng rng;
  TempDir dir;
  write_shard(dir / "model.safetensors", {"a", "b"}, rng);
  auto s = TensorStore::open_dir(dir.path());
  EXPECT_EQ(s.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.metadata().at("shard"), "model.safetensors");
  EXPECT_EQ(s.at("b").shape, (std::vector<int64_t>{2, 3}));
  expect_error([&] { s.at("c"); }, {dir.path().string(), "\"c\""});
}

TEST(TensorStore, ShardedIndex) {
  io_test::Rng rng;
  TempDir dir;
  write_shard(dir / "s1.safetensors", {"a", "b"}, rng);
  write_shard(dir / "s2.safetensors", {"c"}, rng);
  write_index(dir.path(), {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "s2.safetensors"}});
  auto s = TensorStore::open_dir(dir.path());
  EXPECT_EQ(s.names().size(), 3u);
  EXPECT_EQ(s.metadata_of("c").at("shard"), "s2.safetensors");
  EXPECT_EQ(s.metadata_of("a").at("shard"), "s1.safetensors");
  EXPECT_NE(s.at("c").file.find("s2.safetensors"), std::string::npos);
}

TEST(TensorStore, MissingShard) {
  io_test::Rng rng;
  TempDir dir;
  write_shard(dir / "s1.safetensors", {"a"}, rng);
  write_index(dir.path(), {{"a", "s1.safetensors"}, {"z", "s9.safetensors"}});
  expect_error([&] { TensorStore::open_dir(dir.path()); },
               {"model.safetensors.index.json", "s9.safetensors", "\"z\"", "does not exist"});
}

TEST(TensorStore, ShardLacksTensor) {
  io_test::Rng rng;
  TempDir dir;
  write_shard(dir / "s1.safetensors", {"a"}, rng);
  write_shard(dir / "s2.safetensors", {"c"}, rng);
  write_index(dir.path(), {{"a", "s1.safetensors"}, {"c", "s1.safetensors"}});
  expect_error([&] { TensorStore::open_dir(dir.path()); },
               {"model.safetensors.index.json", "\"c\"", "s1.safetensors", "lacks"});
}

TEST(TensorStore, BadIndexAndEmptyDir) {
  TempDir dir;
  expect_error([&] { TensorStore::open_dir(dir.path()); },
               {dir.path().string(), "model.safetensors"});
  expect_error([&] { TensorStore::open_dir(dir / "nope"); }, {"nope", "not a directory"});
  io_test::write_text(dir / "model.safetensors.index.json", R"({"weight_map": [1]})");
  expect_error([&] { TensorStore::open_dir(dir.path()); }, {"index.json", "weight_map"});
  write_index(dir.path(), {{"a", "../escape.safetensors"}});
  expect_error([&] { TensorStore::open_dir(dir.path()); }, {"index.json", "invalid shard"});
  write_index(dir.path(), {{"a", 3}});
  expect_error([&] { TensorStore::open_dir(dir.path()); }, {"index.json", "\"a\""});
}

TEST(TensorStore, HouseModelMatchesConfig) {
  const auto dir = data_dir() / "models" / "house-49m";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " not present";
  auto s = TensorStore::open_dir(dir);
  auto c = ModelConfig::load(dir);
  std::ifstream in(dir / "model.safetensors.index.json");
  auto index = nlohmann::json::parse(in);
  EXPECT_EQ(s.names().size(), index["weight_map"].size());
  for (const auto& [name, _] : index["weight_map"].items()) EXPECT_NE(s.find(name), nullptr) << name;

  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  auto expect_shape = [&](const std::string& name, std::vector<int64_t> shape) {
    const TensorView& v = s.at(name);
    EXPECT_EQ(v.shape, shape) << name;
    EXPECT_EQ(v.dtype, DType::BF16) << name;
  };
  expect_shape("model.embed_tokens.weight", {c.vocab_size, H});
  expect_shape("model.norm.weight", {H});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    expect_shape(p + "self_attn.q_proj.weight", {c.num_heads * D, H});
    expect_shape(p + "self_attn.k_proj.weight", {c.num_kv_heads * D, H});
    expect_shape(p + "self_attn.v_proj.weight", {c.num_kv_heads * D, H});
    expect_shape(p + "self_attn.o_proj.weight", {H, c.num_heads * D});
    expect_shape(p + "mlp.gate_proj.weight", {I, H});
    expect_shape(p + "mlp.up_proj.weight", {I, H});
    expect_shape(p + "mlp.down_proj.weight", {H, I});
    expect_shape(p + "input_layernorm.weight", {H});
    expect_shape(p + "post_attention_layernorm.weight", {H});
  }
  EXPECT_EQ(s.names().size(), size_t(2 + 9 * c.num_layers) + (c.tie_word_embeddings ? 0 : 1));
  // Decoding works and gives finite, non-trivial values.
  auto norm = s.at("model.norm.weight").to_float();
  double sum = 0;
  for (float v : norm) {
    ASSERT_TRUE(std::isfinite(v));
    sum += std::fabs(v);
  }
  EXPECT_GT(sum, 0.0);
}

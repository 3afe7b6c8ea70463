#include "cuda_runtime/tiny_hf.h"

#include <cmath>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "nibble/error.h"
#include "nibble/paths.h"
#include "nibble/safetensors.h"

namespace nibble::cuda::test {
namespace {

nlohmann::json config(const TinyHfSpec& s) {
  return {{"architectures", {s.arch}},
          {"hidden_size", s.hidden},
          {"intermediate_size", s.inter},
          {"num_hidden_layers", s.layers},
          {"num_attention_heads", s.heads},
          {"num_key_value_heads", s.kv_heads},
          {"head_dim", s.head_dim},
          {"vocab_size", s.vocab},
          {"max_position_embeddings", s.max_positions},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", s.tied},
          {"torch_dtype", "float32"}};
}

}  // namespace

TinyHf::TinyHf(const TinyHfSpec& s, uint32_t seed) : spec_(s) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  SafetensorsWriter w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float sd, float mean = 0) {
    std::vector<float> v(size_t(shape[0] * (shape.size() > 1 ? shape[1] : 1)));
    for (float& x : v) x = mean + sd * nd(gen);
    w.add_f32(name, shape, v.data());
  };
  const int64_t H = s.hidden, qd = int64_t(s.heads) * s.head_dim, kd = int64_t(s.kv_heads) * s.head_dim;
  const float in_h = 1.0f / std::sqrt(float(H));
  add("model.embed_tokens.weight", {s.vocab, H}, 1.0f);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {qd, H}, 2 * in_h);
    add(p + "self_attn.k_proj.weight", {kd, H}, 2 * in_h);
    add(p + "self_attn.v_proj.weight", {kd, H}, in_h);
    add(p + "self_attn.o_proj.weight", {H, qd}, 0.5f / std::sqrt(float(qd)));
    add(p + "mlp.gate_proj.weight", {s.inter, H}, in_h);
    add(p + "mlp.up_proj.weight", {s.inter, H}, in_h);
    add(p + "mlp.down_proj.weight", {H, s.inter}, 0.5f / std::sqrt(float(s.inter)));
    if (s.arch == "Qwen2ForCausalLM") {
      add(p + "self_attn.q_proj.bias", {qd}, 0.3f);
      add(p + "self_attn.k_proj.bias", {kd}, 0.3f);
      add(p + "self_attn.v_proj.bias", {kd}, 0.3f);
    }
    if (s.arch == "Qwen3ForCausalLM") {
      add(p + "self_attn.q_norm.weight", {s.head_dim}, 0.1f, 1.0f);
      add(p + "self_attn.k_norm.weight", {s.head_dim}, 0.1f, 1.0f);
    }
  }
  add("model.norm.weight", {H}, 0.1f, 1.0f);
  if (!s.tied) add("lm_head.weight", {s.vocab, H}, s.head_gain * in_h);
  std::random_device rd;
  dir_ = std::filesystem::temp_directory_path() / ("nibble_cuda_rt_" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(dir_);
  w.write(dir_ / "model.safetensors");
  std::ofstream(dir_ / "config.json") << config(s).dump(2);
  const auto tok = data_dir() / "models" / "smollm2-135m-instruct-tokenizer";
  if (!std::filesystem::exists(tok / "tokenizer.json"))
    throw Error((tok / "tokenizer.json").string() + ": not found (the GPU tests need the shared data; set NIBBLE_DATA)");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(tok / f, dir_ / f);
}

TinyHf::~TinyHf() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace nibble::cuda::test

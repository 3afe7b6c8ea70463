#pragma once
// The architecture of a Hugging Face causal LM, read from config.json.
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace nibble {

struct RopeScaling {  // Llama-3 style "llama3" rope scaling; type "" = none
  std::string type;
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  int original_max_positions = 8192;
};

struct ModelConfig {
  std::string architecture;   // LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM
  std::string model_type;     // llama, mistral, qwen2, qwen3
  int hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int vocab_size = 0, max_positions = 2048;
  double rms_norm_eps = 1e-5, rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qk_norm = false;        // Qwen3: RMSNorm on q and k per head
  bool attention_bias = false; // Qwen2: bias on q/k/v projections
  std::optional<int> sliding_window;  // Mistral (informational; nibble attends fully within ctx)
  int bos_token_id = -1, eos_token_id = -1;
  std::string dtype;           // "bfloat16", "float16", "float32" (from "dtype" or "torch_dtype")
  nlohmann::json quantization; // "quantization_config" object, or null
  nlohmann::json raw;          // the whole file, to write back

  // Reads and validates DIR/config.json (or a config.json path). Unknown architectures and
  // missing / ill-typed fields throw nibble::Error naming the file and field.
  static ModelConfig load(const std::filesystem::path& dir_or_file);
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source);
};

}  // namespace nibble

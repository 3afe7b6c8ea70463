#pragma once
// Small random Hugging Face models for the GPU runtime tests: config.json + model.safetensors
// (F32, random normal weights scaled by 1/sqrt(fan-in)) + the SmolLM2 tokenizer (vocab 49152),
// in a temp directory removed with the object.
#include <filesystem>
#include <random>
#include <string>

namespace nibble::cuda::test {

struct TinyHfSpec {
  std::string arch = "LlamaForCausalLM";  // Qwen2ForCausalLM: q/k/v biases; Qwen3ForCausalLM: qk-norm
  int hidden = 256, inter = 688, layers = 4, heads = 8, kv_heads = 2, head_dim = 64, vocab = 49152;
  int max_positions = 1024;
  bool tied = false;
  float head_gain = 1.0f;  // multiplies the output layer (larger: larger logit margins)
};

class TinyHf {
 public:
  TinyHf(const TinyHfSpec& spec, uint32_t seed);
  ~TinyHf();
  TinyHf(const TinyHf&) = delete;
  TinyHf& operator=(const TinyHf&) = delete;
  const std::filesystem::path& dir() const { return dir_; }
  const TinyHfSpec& spec() const { return spec_; }

 private:
  TinyHfSpec spec_;
  std::filesystem::path dir_;
};

}  // namespace nibble::cuda::test

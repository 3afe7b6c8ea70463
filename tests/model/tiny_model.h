#pragma once
// Tiny random Llama-family models written to a temp directory, and a float64 reference forward
// pass written independently of src/model (plain loops, no caching, no batching tricks).
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nibble/model.h"

namespace nibble::test {

struct TinySpec {
  std::string arch = "LlamaForCausalLM";  // or Qwen2ForCausalLM / Qwen3ForCausalLM
  int hidden = 32, inter = 48, layers = 2, heads = 4, kv_heads = 2, head_dim = 8, vocab = 64;
  bool tied = false;
  bool llama3_rope = false;
  double theta = 10000.0, eps = 1e-5;
  nlohmann::json config() const;
};

using Tensors = std::map<std::string, std::vector<float>>;
using Shapes = std::map<std::string, std::vector<int64_t>>;

struct TinyModel {
  TinySpec spec;
  Tensors tensors;
  Shapes shapes;
  std::filesystem::path dir;  // holds config.json + model.safetensors (F32)
  ~TinyModel();
};

// Load options for tiny models: they borrow llama2.c's small tokenizer (tests never encode text).
LoadOptions tiny_options();

// Random weights (seeded by `gen`), written as an HF directory under a fresh temp folder.
TinyModel make_tiny_model(const TinySpec& spec, std::mt19937& gen);
// A fresh empty temp directory (removed by the caller).
std::filesystem::path fresh_temp_dir(const std::string& tag);

// What the KV cache does to each K (after RoPE) and V head vector of n values, in place.
using HeadQuant = std::function<void(double* head, size_t n)>;

// Logits [T x vocab] for all positions of ids, in float64 (with kv: as a quantized KV cache sees
// them).
std::vector<double> reference_forward(const TinySpec& s, const Tensors& t, const std::vector<int>& ids,
                                      const HeadQuant& kv = {});

}  // namespace nibble::test

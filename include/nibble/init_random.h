#pragma once
// Random-weight models with the exact shapes of published architectures, for benchmarks where the
// real weights are not at hand (`nibble init-random`). Writes a standard Hugging Face directory:
// config.json (the architecture's published hyperparameters), a tokenizer, sharded safetensors and
// a README.txt that says the weights are RANDOM.
//
// The tokenizer is a stand-in: the real Llama-3 / Qwen3 tokenizers are not available, so the
// SmolLM2 tokenizer (49152 entries, from nibble::data_dir()) is copied; bos / eos ids are its own.
//
// Weights ("realistic spread", so 4-bit formats see outliers like those of trained models):
//   linear layers (incl. lm_head): N(0, 0.02), of which a fraction 1/1024 is replaced by
//                                  2 * 0.02 * Student-t(4) (heavy tail);
//   norms (RMSNorm weights):       1 + N(0, 0.05);
//   embeddings and biases:         N(0, 0.02).
// Each chunk of 64Ki elements of a tensor draws from its own generator, seeded from (seed, tensor
// name, chunk index): the bytes depend on the seed only, not on the thread count.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nibble/safetensors.h"

namespace nibble {

struct InitRandomOptions {
  uint64_t seed = 0;
  DType dtype = DType::BF16;                  // BF16, F16 or F32
  uint64_t max_shard_bytes = 4'000'000'000;   // a tensor larger than this gets a shard of its own
  int layers = 0;                             // > 0: override num_hidden_layers (shallower model)
  bool progress = false;                      // progress bar on stderr
};

struct InitRandomSummary {
  int64_t parameters = 0;
  uint64_t bytes = 0;  // tensor data bytes written
  int tensors = 0, shards = 0;
  double seconds = 0;
};

// "llama-3.1-8b", "qwen3-8b", "tiny" (a small Llama-shaped model for tests).
const std::vector<std::string>& random_archs();
// The config.json of an architecture (published values; bos / eos of the stand-in tokenizer).
// Throws nibble::Error naming the unknown architecture and listing the known ones.
nlohmann::json random_arch_config(const std::string& arch);
// Parses "bf16" / "fp16" / "fp32"; throws nibble::Error naming `field` otherwise.
DType random_weight_dtype(const std::string& name, const std::string& field = "--dtype");

// Writes a random model of `arch` into dir (created; must be absent or empty, else nibble::Error).
InitRandomSummary init_random(const std::string& arch, const std::filesystem::path& dir,
                              const InitRandomOptions& opt);
// Same for any supported config.json (nibble::ModelConfig::from_json validates it): the tensors
// are those the config implies (Llama / Mistral / Qwen2 biases / Qwen3 q-k norms, tied or not).
InitRandomSummary write_random_model(const nlohmann::json& config, const std::filesystem::path& dir,
                                     const InitRandomOptions& opt);

}  // namespace nibble

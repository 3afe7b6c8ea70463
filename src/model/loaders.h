#pragma once
// The two ways into a Model: a Hugging Face directory (plain or nibble-quantized) and a llama2.c
// checkpoint. Each fills cfg, tokenizer and the weights of w (w.opts is set by the caller).
#include <filesystem>

#include "model/weights.h"

namespace nibble {

void load_hf_directory(const std::filesystem::path& dir, ModelWeights& w);
void load_llama2c_checkpoint(const std::filesystem::path& file, ModelWeights& w);

}  // namespace nibble

#pragma once
// Perplexity by the protocol of ../shared/data/README.md: the token ids cut into non-overlapping
// windows of ctx tokens (tail dropped), each window evaluated from an empty cache, tokens 1..ctx-1
// scored; PPL = exp(total NLL / scored tokens).
#include <cstdint>
#include <filesystem>
#include <span>

#include "nibble/model.h"

namespace nibble {

struct PerplexityOptions {
  int ctx = 0;          // 0: default_ppl_context(config)
  int max_windows = 0;  // 0: all
  bool progress = true;
  // Where the windows run; empty: a CPU nibble::Session over the model.
  SequenceFactory make_sequence;
};

struct PerplexityResult {
  double ppl = 0, nll_sum = 0;
  int64_t total_tokens = 0;   // tokens in the text
  int64_t scored_tokens = 0;  // windows * (ctx - 1)
  int ctx = 0, windows = 0;
  double seconds = 0, tokens_per_second = 0;  // forward throughput (windows * ctx / seconds)
};

// 2048, or half the model's maximum positions when that is smaller (the house model, max 2048,
// is evaluated at 1024 as its reference numbers are).
int default_ppl_context(const ModelConfig& cfg);

PerplexityResult perplexity(const Model& m, std::span<const int32_t> ids,
                            const PerplexityOptions& opt = {});
// Reads the file whole (UTF-8), tokenizes it with the model's tokenizer (no BOS/EOS), evaluates.
PerplexityResult perplexity_of_file(const Model& m, const std::filesystem::path& text,
                                    const PerplexityOptions& opt = {});

}  // namespace nibble

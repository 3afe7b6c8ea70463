#pragma once
// BOS / EOS ids for a tokenizer.json, which does not say them itself: taken from the model files
// beside it, first generation_config.json, then config.json (bos_token_id / eos_token_id, the
// ids generation actually uses), then tokenizer_config.json (bos_token / eos_token strings).
#include <cstdint>
#include <filesystem>

#include "tokenizer/token_map.h"

namespace nibble::tok {

struct SpecialIds {
  int32_t bos = -1, eos = -1;
};

// `token_ids` maps token text to id (for tokenizer_config.json's strings).
SpecialIds find_special_ids(const std::filesystem::path& dir, const TokenMap& token_ids);

}  // namespace nibble::tok

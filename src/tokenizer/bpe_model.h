#pragma once
// The "model" of a Hugging Face tokenizer.json of type BPE: vocab, ranked merges, and the
// merge loop of the tokenizers library (lowest rank first, leftmost first among equals).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/token_map.h"

namespace nibble::tok {

class BpeModel {
 public:
  // `spec` is the "model" field; `file` names tokenizer.json in errors.
  BpeModel(const nlohmann::json& spec, const std::string& file);

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const TokenMap& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank, new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  const Merge* find_merge(int32_t a, int32_t b) const;
  void load_merges(const nlohmann::json& merges, const std::string& file);
  // The word's characters as initial symbols (unknown ones via byte fallback or unk).
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids) const;
  void merge_all(std::vector<int32_t>& ids) const;

  TokenMap vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
};

}  // namespace nibble::tok

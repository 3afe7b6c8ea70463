#pragma once
// What each id of a byte-level tokenizer.json decodes to, per the ByteLevel decoder: a token whose
// characters are all in the byte alphabet gives those bytes; any other token (e.g. an added token
// with a space in it) gives its text as is.
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/hf_added_tokens.h"

namespace nibble::tok {

class HfTokenTexts {
 public:
  HfTokenTexts() = default;
  HfTokenTexts(const TokenMap& vocab, const std::vector<AddedToken>& added, const std::string& file);
  // Throws nibble::Error for an id that names no token.
  const std::string& bytes(int32_t id) const;
  int32_t size() const { return int32_t(bytes_.size()); }

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> present_;
};

}  // namespace nibble::tok

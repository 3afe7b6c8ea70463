#pragma once
// The "added_tokens" of a tokenizer.json: the input is cut at them before anything else, with
// leftmost-longest matching and the lstrip / rstrip / single_word rules of the tokenizers library.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace nibble::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A cut of the input: plain text (id == -1) or one added token.
struct TextPiece {
  std::string_view text;
  int32_t id;
};

class Regex;

// Matches one set of added tokens (the library keeps two: normalized and not).
class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  ~AddedTokenMatcher();
  // Cuts `text` at the tokens of this set, appending the pieces to `out`.
  void split(std::string_view text, std::vector<TextPiece>& out) const;

 private:
  // The longest token matching at text[pos], or nullptr.
  const AddedToken* longest_at(std::string_view text, size_t pos) const;
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<const AddedToken*>> by_first_byte_;  // longest first
  std::unique_ptr<Regex> word_char_;
};

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& list, const std::string& file);

}  // namespace nibble::tok

#include "tokenizer/hf_added_tokens.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "nibble/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace nibble::tok {
namespace {

// Rust's char::is_whitespace / regex \s: the Unicode White_Space property.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Start of the last character of s (s non-empty, valid UTF-8).
size_t last_char_start(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

// Where the run of white space that ends `s` begins.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    const size_t i = last_char_start(s.substr(0, end));
    if (!is_white_space(utf8_decode_at(s, i))) break;
    end = i;
  }
  return end;
}

// Length of the run of white space that starts `s`.
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = utf8_step(s, i).len;
    if (!is_white_space(utf8_decode_at(s, i))) break;
    i += len;
  }
  return i;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)), by_first_byte_(256) {
  for (const AddedToken& t : tokens_)
    if (!t.content.empty())
      by_first_byte_[static_cast<unsigned char>(t.content[0])].push_back(&t);
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [](const AddedToken* a, const AddedToken* b) {
      return a->content.size() > b->content.size();
    });
  // Rust's \w: alphabetic, marks, decimal digits, connector punctuation, joiners.
  word_char_ = std::make_unique<Regex>(R"([\p{L}\p{Nl}\p{Nd}\p{M}\p{Pc}\x{200C}\x{200D}])", false,
                                       "added-token word test");
}

AddedTokenMatcher::~AddedTokenMatcher() = default;

const AddedToken* AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  for (const AddedToken* t : by_first_byte_[static_cast<unsigned char>(text[pos])])
    if (text.compare(pos, t->content.size(), t->content) == 0) return t;
  return nullptr;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextPiece>& out) const {
  size_t done = 0;  // text before this is already emitted
  size_t pos = 0;   // where the search for the next match resumes
  while (pos < text.size()) {
    const AddedToken* t = longest_at(text, pos);
    if (!t) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + t->content.size();
    pos = stop;
    if (t->single_word) {
      const bool word_before =
          start > 0 && word_char_->matches_prefix(text.substr(last_char_start(text.substr(0, start))));
      const bool word_after = stop < text.size() && word_char_->matches_prefix(text.substr(stop));
      if (word_before || word_after) continue;
    }
    if (start < done) continue;  // an earlier token's rstrip swallowed this one's start
    if (t->lstrip) start = std::max(trailing_space_start(text.substr(0, start)), done);
    if (t->rstrip) stop += leading_space_len(text.substr(stop));
    if (done < start) out.push_back({text.substr(done, start - done), -1});
    out.push_back({text.substr(start, stop - start), t->id});
    done = stop;
  }
  if (done < text.size()) out.push_back({text.substr(done), -1});
}

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& list, const std::string& file) {
  std::vector<AddedToken> out;
  if (list.is_null()) return out;
  try {
    for (const auto& j : list) {
      AddedToken t;
      t.id = j.at("id").get<int32_t>();
      t.content = j.at("content").get<std::string>();
      t.single_word = j.value("single_word", false);
      t.lstrip = j.value("lstrip", false);
      t.rstrip = j.value("rstrip", false);
      t.special = j.value("special", false);
      t.normalized = j.value("normalized", !t.special);
      check_utf8(t.content, fmt::format("{}: added token {}", file, t.id));
      if (t.id < 0) throw Error(fmt::format("{}: added token \"{}\" has negative id", file, t.content));
      out.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed added_tokens: {}", file, e.what()));
  }
  return out;
}

}  // namespace nibble::tok

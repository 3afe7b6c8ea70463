#pragma once
// A compiled PCRE2 pattern (UTF + UCP, JIT when available) for the tokenizers' pre-tokenizers.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::tok {

struct Span {
  size_t begin, end;  // byte offsets
};

class Regex {
 public:
  // `literal` matches the pattern text as is (HF Split's {"String": ...}). `what` names the file
  // and field in the error a bad pattern raises.
  Regex(std::string_view pattern, bool literal, std::string_view what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every non-overlapping match, left to right, as Rust's find_iter reports them (an empty match
  // is reported and the search moves on by one character). `text` must be valid UTF-8.
  void find_all(std::string_view text, std::vector<Span>& out) const;
  // Whether the pattern matches starting exactly at the beginning of `text`.
  bool matches_prefix(std::string_view text) const;

 private:
  void* code_;  // pcre2_code_8*
};

}  // namespace nibble::tok

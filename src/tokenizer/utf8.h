#pragma once
// UTF-8 helpers shared by the tokenizers: strict validation (well-formed sequences only, as in
// Unicode Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF) and lossy decoding.
#include <cstddef>
#include <string>
#include <string_view>

namespace nibble::tok {

// One step over s[i]: the length of the well-formed sequence there (ok), or, when the bytes there
// are not well formed, the length of the maximal subpart that one U+FFFD replaces (not ok).
struct Utf8Step {
  size_t len;
  bool ok;
};
Utf8Step utf8_step(std::string_view s, size_t i);

// Throws nibble::Error "<what>: invalid UTF-8 at byte N" at the first ill-formed byte.
void check_utf8(std::string_view s, std::string_view what);

// Every ill-formed maximal subpart replaced by U+FFFD (what Rust's String::from_utf8_lossy does).
std::string utf8_lossy(std::string_view bytes);

void append_utf8(std::string& out, char32_t cp);

// The code point of the well-formed sequence starting at s[i] (whose length is utf8_step().len).
char32_t utf8_decode_at(std::string_view s, size_t i);

}  // namespace nibble::tok

#include "tokenizer/utf8.h"

#include <fmt/format.h>

#include "nibble/error.h"

namespace nibble::tok {

Utf8Step utf8_step(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {1, true};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;  // no overlongs
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, false};
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return {k, false};
    const auto d = static_cast<unsigned char>(s[i + k]);
    const bool fits = k == 1 ? (d >= lo && d <= hi) : (d >= 0x80 && d <= 0xBF);
    if (!fits) return {k, false};
  }
  return {need + 1, true};
}

void check_utf8(std::string_view s, std::string_view what) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Step st = utf8_step(s, i);
    if (!st.ok) throw Error(fmt::format("{}: invalid UTF-8 at byte {}", what, i));
    i += st.len;
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const Utf8Step st = utf8_step(bytes, i);
    if (st.ok)
      out.append(bytes.substr(i, st.len));
    else
      out.append("\xEF\xBF\xBD");
    i += st.len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

char32_t utf8_decode_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) { return char32_t(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  if (c < 0x80) return c;
  if (c < 0xE0) return (char32_t(c & 0x1F) << 6) | cont(1);
  if (c < 0xF0) return (char32_t(c & 0x0F) << 12) | (cont(1) << 6) | cont(2);
  return (char32_t(c & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
}

}  // namespace nibble::tok

#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace nibble::tok {
namespace {

bool shown_as_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<std::string, 256> to_char;
  std::array<int, 512> from_cp;  // every shown code point is below U+0200
  Alphabet() {
    from_cp.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = shown_as_itself(b) ? char32_t(b) : next++;
      append_utf8(to_char[b], cp);
      from_cp[cp] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

const std::string& byte_to_char(unsigned char b) { return alphabet().to_char[b]; }

int char_to_byte(char32_t cp) { return cp < 512 ? alphabet().from_cp[cp] : -1; }

std::string bytes_to_chars(std::string_view raw) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += a.to_char[static_cast<unsigned char>(c)];
  return out;
}

}  // namespace nibble::tok

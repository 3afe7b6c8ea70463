#pragma once
// GPT-2's byte-level alphabet: every byte is shown as one printable Unicode character (printable
// Latin-1 bytes as themselves, the rest as U+0100 + n in byte order), so BPE works on text.
#include <string>
#include <string_view>

namespace nibble::tok {

// The UTF-8 of the character byte b is shown as.
const std::string& byte_to_char(unsigned char b);
// The byte shown as code point cp, or -1 when cp is not in the alphabet.
int char_to_byte(char32_t cp);
// Maps every byte of `raw` to its character.
std::string bytes_to_chars(std::string_view raw);

}  // namespace nibble::tok

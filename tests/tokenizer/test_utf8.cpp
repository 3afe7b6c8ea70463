// UTF-8 validation and lossy decoding against a separately written code-point reference.
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "nibble/error.h"
#include "tokenizer/utf8.h"

namespace {

// Reference: decode one scalar value the long way; nullopt when s[i..] does not start with one.
std::optional<size_t> ref_sequence_len(const std::string& s, size_t i) {
  const unsigned c = static_cast<unsigned char>(s[i]);
  size_t len;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
  else return std::nullopt;
  if (i + len > s.size()) return std::nullopt;
  for (size_t k = 1; k < len; ++k) {
    const unsigned d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (d & 0x3F);
  }
  const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  return len;
}

bool ref_valid(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    auto len = ref_sequence_len(s, i);
    if (!len) return false;
    i += *len;
  }
  return true;
}

bool accepts(const std::string& s) {
  try {
    nibble::tok::check_utf8(s, "test");
    return true;
  } catch (const nibble::Error&) {
    return false;
  }
}

// Mostly-valid random bytes: UTF-8 of random code points with some bytes flipped or cut.
std::string random_bytes(std::mt19937& rng) {
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 12)(rng);
  for (int i = 0; i < n; ++i) {
    const uint32_t top[4] = {0x80, 0x800, 0x10000, 0x110000};
    char32_t cp = std::uniform_int_distribution<uint32_t>(0, top[rng() % 4] - 1)(rng);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
    nibble::tok::append_utf8(s, cp);
  }
  if (!s.empty() && rng() % 2) s[rng() % s.size()] = char(rng());
  if (!s.empty() && rng() % 4 == 0) s.resize(rng() % s.size());
  return s;
}

}  // namespace

TEST(Utf8, ValidationMatchesReference) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 200000; ++trial) {
    const std::string s = random_bytes(rng);
    ASSERT_EQ(accepts(s), ref_valid(s)) << "seed " << seed << " trial " << trial;
  }
}

TEST(Utf8, EdgeSequences) {
  EXPECT_TRUE(accepts(""));
  EXPECT_TRUE(accepts("\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(accepts("\xC0\xAF"));          // overlong
  EXPECT_FALSE(accepts("\xE0\x9F\xBF"));      // overlong
  EXPECT_FALSE(accepts("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(accepts("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(accepts("\xE2\x82"));          // cut short
  EXPECT_FALSE(accepts("\x80"));              // lone continuation
  EXPECT_FALSE(accepts("\xFF"));
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  // The Unicode Standard's example (section 3.9, U+FFFD substitution of maximal subparts).
  EXPECT_EQ(nibble::tok::utf8_lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd");
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 20000; ++trial) {
    const std::string s = random_bytes(rng);
    const std::string out = nibble::tok::utf8_lossy(s);
    ASSERT_TRUE(ref_valid(out)) << "seed " << seed;
    if (ref_valid(s)) {
      ASSERT_EQ(out, s) << "seed " << seed;
    }
  }
}

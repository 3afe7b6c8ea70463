// Parts of the tokenizer.json implementation on small hand-made specs: Split behaviors (the
// examples of the tokenizers documentation), Digits, ByteLevel, added-token stripping rules.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nibble/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_added_tokens.h"
#include "tokenizer/hf_pre_tokenizer.h"

namespace {

using nlohmann::json;
using Words = std::vector<std::string>;

Words pre_tokenize(const json& spec, const std::string& text) {
  Words out;
  nibble::tok::HfPreTokenizer(spec, "test.json").split(text, out);
  return out;
}

json split_spec(const std::string& behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
}

}  // namespace

TEST(HfPreTokenizer, SplitBehaviors) {
  const std::string t = "the-final--countdown";
  EXPECT_EQ(pre_tokenize(split_spec("Removed"), t), (Words{"the", "final", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_spec("Isolated"), t), (Words{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_spec("MergedWithPrevious"), t), (Words{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_spec("MergedWithNext"), t), (Words{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pre_tokenize(split_spec("Contiguous"), t), (Words{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_spec("Removed", true), t), (Words{"-", "-", "-"}));
}

TEST(HfPreTokenizer, RegexSplitAndSequence) {
  const json spec = {{"type", "Sequence"},
                     {"pretokenizers",
                      {{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Removed"}},
                       {{"type", "Digits"}, {"individual_digits", false}}}}};
  EXPECT_EQ(pre_tokenize(spec, "ab12 \u00e9t\u00e9\u00b2  x"), (Words{"ab", "12", "\u00e9t\u00e9", "\u00b2", "x"}));
  const json digits = {{"type", "Digits"}, {"individual_digits", true}};
  EXPECT_EQ(pre_tokenize(digits, "a123b"), (Words{"a", "1", "2", "3", "b"}));
}

TEST(HfPreTokenizer, ByteLevelSplitsLikeGpt2AndMapsBytes) {
  const json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  const auto c = [](const std::string& s) { return nibble::tok::bytes_to_chars(s); };
  EXPECT_EQ(pre_tokenize(bl, "Hello world's  end\n"),
            (Words{c("Hello"), c(" world"), c("'s"), c(" "), c(" end"), c("\n")}));
  json with_prefix = bl;
  with_prefix["add_prefix_space"] = true;
  EXPECT_EQ(pre_tokenize(with_prefix, "Hi"), (Words{c(" Hi")}));
  json no_regex = bl;
  no_regex["use_regex"] = false;
  EXPECT_EQ(pre_tokenize(no_regex, "a b"), (Words{c("a b")}));
  EXPECT_EQ(c(" "), "\u0120");  // GPT-2's Ġ
  EXPECT_EQ(c("\n"), "\u010a");
}

TEST(HfPreTokenizer, UnsupportedTypesNameFileAndType) {
  for (const json& spec : {json{{"type", "Whitespace"}}, json{{"type", "Metaspace"}},
                           json{{"type", "Split"}, {"pattern", {{"Regex", "("}}}, {"behavior", "Removed"}},
                           json{{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Odd"}}}) {
    try {
      nibble::tok::HfPreTokenizer p(spec, "weird.json");
      ADD_FAILURE() << spec.dump();
    } catch (const nibble::Error& e) {
      EXPECT_NE(std::string(e.what()).find("weird.json"), std::string::npos) << e.what();
    }
  }
}

namespace {

std::vector<std::pair<std::string, int32_t>> cut(const std::vector<nibble::tok::AddedToken>& toks,
                                                 const std::string& text) {
  std::vector<nibble::tok::TextPiece> pieces;
  nibble::tok::AddedTokenMatcher(toks).split(text, pieces);
  std::vector<std::pair<std::string, int32_t>> out;
  for (const auto& p : pieces) out.emplace_back(std::string(p.text), p.id);
  return out;
}

nibble::tok::AddedToken added(const std::string& s, int32_t id, bool lstrip = false,
                              bool rstrip = false, bool single_word = false) {
  nibble::tok::AddedToken t;
  t.content = s;
  t.id = id;
  t.lstrip = lstrip;
  t.rstrip = rstrip;
  t.single_word = single_word;
  return t;
}

using Cut = std::vector<std::pair<std::string, int32_t>>;

}  // namespace

TEST(HfAddedTokens, LeftmostLongestMatch) {
  const std::vector toks = {added("<a>", 7), added("<a><b>", 8), added("b>", 9)};
  EXPECT_EQ(cut(toks, "x<a><b>y<a>b>"),
            (Cut{{"x", -1}, {"<a><b>", 8}, {"y", -1}, {"<a>", 7}, {"b>", 9}}));
  EXPECT_EQ(cut(toks, ""), Cut{});
  EXPECT_EQ(cut(toks, "plain"), (Cut{{"plain", -1}}));
}

TEST(HfAddedTokens, StripAndSingleWordRules) {
  EXPECT_EQ(cut({added("<m>", 1, true, false)}, "a \t<m> b"), (Cut{{"a", -1}, {" \t<m>", 1}, {" b", -1}}));
  EXPECT_EQ(cut({added("<m>", 1, false, true)}, "a <m>\u3000 b"), (Cut{{"a ", -1}, {"<m>\u3000 ", 1}, {"b", -1}}));
  const std::vector sw = {added("cat", 2, false, false, true)};
  EXPECT_EQ(cut(sw, "cat concat cats cat"), (Cut{{"cat", 2}, {" concat cats ", -1}, {"cat", 2}}));
  EXPECT_EQ(cut(sw, "\u00e9cat"), (Cut{{"\u00e9cat", -1}}));  // é is a word character
}

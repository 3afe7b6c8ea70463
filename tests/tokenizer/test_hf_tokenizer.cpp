// The tokenizer.json loader end to end: round trips on fresh random text, decoding edge cases,
// invalid input, and malformed or unsupported files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "nibble/error.h"
#include "nibble/tokenizer.h"
#include "tokenizer/reference_data.h"
#include "tokenizer/tokenizer_paths.h"

namespace {

using nlohmann::json;

const nibble::Tokenizer& smollm2() {
  static const auto tok = nibble::load_hf_tokenizer(nibble::test::smollm2_json());
  return *tok;
}

// Random text over ASCII, Latin, CJK, emoji, white space and the special-token spellings.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> parts = {
      "a", "Z", " ", "  ", "\n", "\t", "\r\n", "7", "42", "'s", "'ll", ".", "!?", "\u00e9",
      "\u00c6", "\u00b2", "\u00a0", "\u200b", "\u65e5\u672c", "\ud55c", "\U0001F916", "\U0001F44D\U0001F3FD",
      "<|endoftext|>", "<|im_start|>", "<|im_end", "word", " word", "\u0439"};
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 40)(rng);
  for (int i = 0; i < n; ++i) s += parts[rng() % parts.size()];
  return s;
}

void expect_error_naming(const std::filesystem::path& file, const std::string& needle) {
  try {
    nibble::load_hf_tokenizer(file);
    ADD_FAILURE() << "no error for " << file;
  } catch (const nibble::Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(HfTokenizer, RoundTripsRandomText) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 500; ++trial) {
    const std::string text = random_text(rng);
    ASSERT_EQ(smollm2().decode(smollm2().encode(text)), text) << "seed " << seed;
  }
}

TEST(HfTokenizer, TokenTextsConcatenateToDecode) {
  const std::string text = "Caf\u00e9 \U0001F916 says: <|im_start|>hi\n";
  std::string joined;
  for (int32_t id : smollm2().encode(text)) joined += smollm2().token_text(id);
  EXPECT_EQ(joined, text);
}

TEST(HfTokenizer, DecodeReplacesBrokenUtf8) {
  int32_t lead = -1;  // the byte-level token of 0xC3 alone, the lead byte of "é"
  for (int32_t id = 0; id < smollm2().vocab_size() && lead < 0; ++id)
    if (smollm2().token_text(id) == "\xC3") lead = id;
  ASSERT_GE(lead, 0);
  EXPECT_EQ(smollm2().decode({lead}), "\uFFFD");
  EXPECT_EQ(smollm2().decode({lead, lead}), "\uFFFD\uFFFD");
  const std::vector<int32_t> copyright = smollm2().encode("\u00a9");  // C2 A9: complete again
  std::vector<int32_t> ids = {lead};
  ids.insert(ids.end(), copyright.begin(), copyright.end());
  EXPECT_EQ(smollm2().decode(ids), "\uFFFD\u00a9");
}

TEST(HfTokenizer, RejectsInvalidUtf8AndBadIds) {
  EXPECT_THROW(smollm2().encode("ok \xC3("), nibble::Error);
  EXPECT_THROW(smollm2().encode("\xED\xA0\x80"), nibble::Error);
  EXPECT_THROW(smollm2().decode({5, -1}), nibble::Error);
  EXPECT_THROW(smollm2().decode({49152}), nibble::Error);
  EXPECT_THROW(smollm2().token_text(1 << 30), nibble::Error);
}

TEST(HfTokenizer, MalformedFilesNameTheFileAndPart) {
  const nibble::test::TempDir dir;
  const std::string good = nibble::test::read_file_bytes(nibble::test::smollm2_json());
  expect_error_naming(dir.write("cut.json", good.substr(0, good.size() / 2)), "not valid JSON");
  expect_error_naming(dir.write("list.json", "[1, 2]"), "tokenizer.json");
  expect_error_naming(dir.path() / "missing.json", "cannot open");

  // The variants start from a small valid file in SmolLM2's shape (quick to load under ASan).
  const json base = {
      {"added_tokens", {{{"id", 3}, {"content", "<|x|>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"},
                         {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}},
                                            {{"type", "ByteLevel"}, {"add_prefix_space", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"},
                 {"vocab", {{"\u0120", 0}, {"t", 1}, {"\u0120t", 2}}},
                 {"merges", {"\u0120 t"}}}}};
  EXPECT_EQ(nibble::load_hf_tokenizer(dir.write("small.json", base.dump()))->encode(" t<|x|>"),
            (std::vector<int32_t>{2, 3}));
  auto variant = [&](const std::string& name, auto edit) {
    json j = base;
    edit(j);
    return dir.write(name, j.dump());
  };
  expect_error_naming(variant("norm.json", [](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }), "NFKC");
  expect_error_naming(variant("pre.json", [](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }),
                      "Metaspace");
  expect_error_naming(variant("dec.json", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }), "WordPiece");
  expect_error_naming(variant("model.json", [](json& j) { j["model"]["type"] = "Unigram"; }), "Unigram");
  expect_error_naming(variant("nomodel.json", [](json& j) { j.erase("model"); }), "model");
  expect_error_naming(variant("merge.json", [](json& j) { j["model"]["merges"][0] = "\u0120t zzzq"; }), "zzzq");
  expect_error_naming(variant("added.json", [](json& j) { j["added_tokens"][0].erase("id"); }), "added_tokens");
  expect_error_naming(variant("vocab.json", [](json& j) { j["model"]["vocab"]["x"] = "seven"; }), "BPE model");
  expect_error_naming(variant("hugeid.json", [](json& j) { j["model"]["vocab"]["zzzq"] = 2000000000; }), "2000000000");
}

TEST(HfTokenizer, ByteLevelPrefixSpaceOption) {
  const nibble::test::TempDir dir;
  json j = json::parse(nibble::test::read_file_bytes(nibble::test::smollm2_json()));
  j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
  const auto tok = nibble::load_hf_tokenizer(dir.write("tokenizer.json", j.dump()));
  EXPECT_EQ(tok->encode("Hello"), smollm2().encode(" Hello"));
  EXPECT_EQ(tok->encode(" Hello"), smollm2().encode(" Hello"));
  EXPECT_EQ(tok->bos_id(), -1);  // no config files beside it
  EXPECT_EQ(tok->eos_id(), -1);
}

// llama2.c tokenizer.bin: against a literal transcription of llama2.c's quadratic encode() on
// fresh random text, against the sentencepiece reference ids, and on malformed files.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "nibble/error.h"
#include "nibble/tokenizer.h"
#include "tokenizer/reference_checks.h"
#include "tokenizer/tokenizer_paths.h"

namespace {

// llama2.c's encode(), step by step, on its own parse of the file.
struct Llama2cReference {
  std::vector<std::string> vocab;
  std::vector<float> scores;
  std::map<std::string, int> ids;

  explicit Llama2cReference(const std::filesystem::path& file) {
    const std::string d = nibble::test::read_file_bytes(file);
    size_t off = 4;
    while (off < d.size()) {
      float score;
      int32_t len;
      std::memcpy(&score, d.data() + off, 4);
      std::memcpy(&len, d.data() + off + 4, 4);
      vocab.push_back(d.substr(off + 8, len));
      scores.push_back(score);
      off += 8 + len;
    }
    for (int i = int(vocab.size()) - 1; i >= 0; --i) ids[vocab[i]] = i;
  }

  int lookup(const std::string& s) const {
    auto it = ids.find(s);
    return it == ids.end() ? -1 : it->second;
  }

  std::vector<int32_t> encode(const std::string& text) const {
    std::vector<int32_t> tokens;
    if (!text.empty()) tokens.push_back(lookup(" "));
    std::string buf;
    for (size_t i = 0; i < text.size(); ++i) {
      if ((text[i] & 0xC0) != 0x80) buf.clear();
      buf += text[i];
      if (i + 1 < text.size() && (text[i + 1] & 0xC0) == 0x80 && buf.size() < 4) continue;
      const int id = lookup(buf);
      if (id != -1) {
        tokens.push_back(id);
      } else {
        for (unsigned char c : buf) tokens.push_back(c + 3);
      }
      buf.clear();
    }
    for (;;) {
      float best_score = -1e10f;
      int best_id = -1, best_idx = -1;
      for (size_t i = 0; i + 1 < tokens.size(); ++i) {
        const int id = lookup(vocab[tokens[i]] + vocab[tokens[i + 1]]);
        if (id != -1 && scores[id] > best_score) best_score = scores[id], best_id = id, best_idx = int(i);
      }
      if (best_idx == -1) break;
      tokens[best_idx] = best_id;
      tokens.erase(tokens.begin() + best_idx + 1);
    }
    return tokens;
  }
};

std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> parts = {
      "a", "e", "th", "the", " ", "  ", "\n", "\t", "in", "ing", "er", "Q", "9", "12", ",", ".",
      "'", "\u00e9", "\u00df", "\u4e2d", "\u6587", "\U0001F916", "\u0416", "\x01", "<s>", "x"};
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 30)(rng);
  for (int i = 0; i < n; ++i) s += parts[rng() % parts.size()];
  return s;
}

void expect_matches_reference(const std::filesystem::path& file) {
  const auto tok = nibble::load_llama2c_tokenizer(file, 0);
  const Llama2cReference ref(file);
  ASSERT_EQ(tok->vocab_size(), int32_t(ref.vocab.size()));
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_text(rng);
    const std::vector<int32_t> ids = tok->encode(text);
    ASSERT_EQ(ids, ref.encode(text)) << "seed " << seed << " text \"" << text << "\"";
    ASSERT_EQ(tok->decode(ids), text) << "seed " << seed;
  }
}

std::string record(float score, const std::string& piece) {
  std::string r(8, '\0');
  const int32_t len = int32_t(piece.size());
  std::memcpy(r.data(), &score, 4);
  std::memcpy(r.data() + 4, &len, 4);
  return r + piece;
}

std::string header(int32_t max_len) { return std::string(reinterpret_cast<const char*>(&max_len), 4); }

void expect_error_naming(const std::filesystem::path& file, int32_t vocab, const std::string& needle) {
  try {
    nibble::load_llama2c_tokenizer(file, vocab);
    ADD_FAILURE() << "no error for " << file;
  } catch (const nibble::Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Llama2cTokenizer, MatchesLlama2cEncodeLlama2Vocab) { expect_matches_reference(nibble::test::llama2_bin()); }

TEST(Llama2cTokenizer, MatchesLlama2cEncodeTok512) { expect_matches_reference(nibble::test::tok512_bin()); }

TEST(Llama2cTokenizer, Llama2BinGivesSentencePieceReferenceIds) {
  // llama2.c's BPE-by-score reproduces sentencepiece on every reference case for Llama-2.
  const auto tok = nibble::load_llama2c_tokenizer(nibble::test::llama2_bin(), 32000);
  nibble::test::expect_reference_cases(*tok, nibble::test::tokenizer_reference().at("llama2_sp"));
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->decode({1, 15043, 2}), "Hello");  // BOS/EOS add nothing; no leading space
}

TEST(Llama2cTokenizer, MalformedFiles) {
  const nibble::test::TempDir dir;
  const std::string ok = header(8) + record(0, "<unk>") + record(0, "<s>") + record(0, "</s>") + record(-1, " ");
  EXPECT_EQ(nibble::load_llama2c_tokenizer(dir.write("ok.bin", ok), 0)->vocab_size(), 4);
  EXPECT_EQ(nibble::load_llama2c_tokenizer(dir.write("ok3.bin", ok), 3)->vocab_size(), 3);
  expect_error_naming(dir.write("ok.bin", ok), 5, "truncated");
  expect_error_naming(dir.write("empty.bin", ""), 0, "max_token_length");
  expect_error_naming(dir.write("maxlen.bin", header(-3) + record(0, "a")), 0, "max_token_length");
  expect_error_naming(dir.write("cut.bin", ok.substr(0, ok.size() - 1)), 0, "truncated");
  expect_error_naming(dir.write("cut2.bin", ok.substr(0, ok.size() - 3)), 0, "truncated");
  expect_error_naming(dir.write("long.bin", ok + record(0, "toolongpiece")), 0, "length 12");
  std::string neg = ok + record(0, "ab");
  const int32_t minus = -5;
  std::memcpy(neg.data() + neg.size() - 6, &minus, 4);
  expect_error_naming(dir.write("neg.bin", neg), 0, "length -5");
  expect_error_naming(dir.write("nan.bin", ok + record(std::nanf(""), "q")), 0, "NaN");
  expect_error_naming(dir.write("nul.bin", ok + record(0, std::string("a\0b", 3))), 0, "NUL");
  expect_error_naming(dir.write("few.bin", header(8) + record(0, "<unk>")), 0, "only 1 tokens");
  expect_error_naming(dir.path() / "absent.bin", 0, "cannot open");
}

TEST(Llama2cTokenizer, EncodeWithoutByteTokensOrSpaceFails) {
  const nibble::test::TempDir dir;
  const auto tok = nibble::load_llama2c_tokenizer(
      dir.write("tiny.bin", header(8) + record(0, "<unk>") + record(0, "<s>") + record(0, "</s>") +
                                record(0, " ") + record(0, "a") + record(1, " a")),
      0);
  EXPECT_EQ(tok->encode("a"), (std::vector<int32_t>{5}));
  EXPECT_EQ(tok->encode("aa"), (std::vector<int32_t>{5, 4}));
  EXPECT_THROW(tok->encode("b"), nibble::Error);  // no <0x62> byte token to fall back on
  EXPECT_THROW(tok->encode("a\xFF"), nibble::Error);
  EXPECT_THROW(tok->decode({6}), nibble::Error);
  const auto no_space = nibble::load_llama2c_tokenizer(
      dir.write("nospace.bin", header(8) + record(0, "<unk>") + record(0, "<s>") + record(0, "</s>")), 0);
  EXPECT_TRUE(no_space->encode("").empty());
  EXPECT_THROW(no_space->encode("x"), nibble::Error);
}

TEST(Llama2cTokenizer, WikiTextRawLikeSentencePieceSlow) {
  const auto tok = nibble::load_llama2c_tokenizer(nibble::test::llama2_bin(), 32000);
  nibble::test::expect_reference_file(*tok, nibble::test::tokenizer_reference().at("llama2_sp"),
                                      "wiki.test.raw");
}

// The BPE merge loop against GPT-2's original algorithm (merge every occurrence of the lowest
// ranked pair, rescan), written separately here on strings, over SmolLM2's vocab and merges.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "nibble/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/reference_data.h"
#include "tokenizer/tokenizer_paths.h"
#include "tokenizer/utf8.h"

namespace {

using nlohmann::json;

struct Reference {
  std::map<std::pair<std::string, std::string>, size_t> ranks;
  std::map<std::string, int32_t> vocab;

  explicit Reference(const json& model) {
    for (const auto& [tok, id] : model.at("vocab").items()) vocab[tok] = id.get<int32_t>();
    const json& merges = model.at("merges");
    for (size_t r = 0; r < merges.size(); ++r) {
      std::string s = merges[r].is_string() ? merges[r].get<std::string>()
                                            : merges[r][0].get<std::string>() + " " + merges[r][1].get<std::string>();
      const size_t sp = s.find(' ');
      ranks[{s.substr(0, sp), s.substr(sp + 1)}] = r;
    }
  }

  std::vector<int32_t> encode(const std::string& word) const {
    std::vector<std::string> parts;
    for (size_t i = 0; i < word.size();) {
      const size_t len = nibble::tok::utf8_step(word, i).len;
      // characters outside the vocab vanish (SmolLM2 has no unk and lacks e.g. byte 0x04)
      if (vocab.count(word.substr(i, len))) parts.push_back(word.substr(i, len));
      i += len;
    }
    for (;;) {
      size_t best = SIZE_MAX;
      std::pair<std::string, std::string> best_pair;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = ranks.find({parts[i], parts[i + 1]});
        if (it != ranks.end() && it->second < best) best = it->second, best_pair = it->first;
      }
      if (best == SIZE_MAX) break;
      std::vector<std::string> next;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (i + 1 < parts.size() && parts[i] == best_pair.first && parts[i + 1] == best_pair.second) {
          next.push_back(parts[i] + parts[i + 1]);
          ++i;
        } else {
          next.push_back(parts[i]);
        }
      }
      parts.swap(next);
    }
    std::vector<int32_t> ids;
    for (const auto& p : parts) ids.push_back(vocab.at(p));
    return ids;
  }
};

const json& smollm2_model() {
  static const json j =
      json::parse(nibble::test::read_file_bytes(nibble::test::smollm2_json())).at("model");
  return j;
}

// Words as the pre-tokenizer would give them: byte-level text of random words, drawn from
// a stretch of WikiText and from random bytes (valid UTF-8 or not: BPE sees bytes).
std::string random_word(std::mt19937& rng, const std::string& corpus) {
  std::string raw;
  if (rng() % 2) {
    const size_t at = rng() % (corpus.size() - 40);
    raw = corpus.substr(at, 1 + rng() % 30);
  } else {
    raw.resize(1 + rng() % 12);
    for (char& c : raw) c = char(rng() % 4 ? 'a' + rng() % 26 : rng());
  }
  return nibble::tok::bytes_to_chars(raw);
}

}  // namespace

TEST(BpeModel, MatchesGpt2MergeAlgorithm) {
  const nibble::tok::BpeModel model(smollm2_model(), "smollm2 tokenizer.json");
  const Reference ref(smollm2_model());
  const std::string corpus = nibble::test::read_file_bytes(
      nibble::data_dir() / "text" / "wikitext-2-raw" / "wiki.test.raw").substr(0, 200000);
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string word = random_word(rng, corpus);
    std::vector<int32_t> got;
    model.encode_word(word, got);
    ASSERT_EQ(got, ref.encode(word)) << "seed " << seed << " word " << word;
  }
  std::vector<int32_t> got;  // long repeats exercise equal-rank overlapping pairs
  model.encode_word(std::string(301, 'a'), got);
  EXPECT_EQ(got, ref.encode(std::string(301, 'a')));
}

TEST(BpeModel, ListFormMergesEqualStringForm) {
  json as_lists = smollm2_model();
  for (json& m : as_lists.at("merges")) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    m = json::array({s.substr(0, sp), s.substr(sp + 1)});
  }
  const nibble::tok::BpeModel a(smollm2_model(), "strings"), b(as_lists, "lists");
  for (const std::string text : {"Hello world", "tokenization", " antidisestablishmentarianism"}) {
    std::vector<int32_t> x, y;
    a.encode_word(nibble::tok::bytes_to_chars(text), x);
    b.encode_word(nibble::tok::bytes_to_chars(text), y);
    EXPECT_EQ(x, y) << text;
    EXPECT_GT(x.size(), 0u);
  }
}

TEST(BpeModel, RejectsBadModels) {
  const json good = {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}};
  EXPECT_NO_THROW(nibble::tok::BpeModel(good, "f.json"));
  auto expect_error = [](const json& spec, const std::string& needle) {
    try {
      nibble::tok::BpeModel m(spec, "f.json");
      ADD_FAILURE() << "no error for " << spec.dump();
    } catch (const nibble::Error& e) {
      EXPECT_NE(std::string(e.what()).find("f.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  json m = good;
  m["merges"] = {"a c"};
  expect_error(m, "\"c\"");
  m["merges"] = {"a b c"};
  expect_error(m, "merge 0");
  m["merges"] = {json::array({"a"})};
  expect_error(m, "merge 0");
  m = good;
  m["type"] = "WordPiece";
  expect_error(m, "WordPiece");
  m = good;
  m["continuing_subword_prefix"] = "##";
  expect_error(m, "continuing_subword_prefix");
  m = good;
  m.erase("vocab");
  expect_error(m, "vocab");
}

TEST(BpeModel, UnknownCharactersUseByteFallbackThenUnk) {
  json spec = {{"type", "BPE"},
               {"vocab", {{"<unk>", 0}, {"a", 1}, {"<0xC3>", 2}, {"<0xA9>", 3}}},
               {"merges", json::array()},
               {"unk_token", "<unk>"},
               {"fuse_unk", true}};
  std::vector<int32_t> ids;
  nibble::tok::BpeModel(spec, "f").encode_word("a\u00e9\u00e8\u00e8a", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0, 1}));  // é, è, è fused into one unk
  spec["byte_fallback"] = true;
  ids.clear();
  nibble::tok::BpeModel(spec, "f").encode_word("a\u00e9\u00e8a", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3, 0, 1}));  // é = C3 A9; è has no 0xA8 token
}

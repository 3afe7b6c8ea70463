// The SmolLM2 tokenizer.json (also the house model's) against ids from Hugging Face tokenizers.
#include <gtest/gtest.h>

#include "tokenizer/reference_checks.h"

namespace {

const nlohmann::json& section() { return nibble::test::tokenizer_reference().at("smollm2"); }

const nibble::Tokenizer& smollm2() {
  static const auto tok =
      nibble::load_hf_tokenizer(nibble::test::model_path(section().at("tokenizer").get<std::string>()));
  return *tok;
}

}  // namespace

TEST(HfTokenizer, ReferenceCases) { nibble::test::expect_reference_cases(smollm2(), section()); }

TEST(HfTokenizer, HouseModelTokenizerMatchesToo) {
  const auto house = nibble::Tokenizer::load(nibble::test::model_path("models/house-49m"));
  nibble::test::expect_reference_cases(*house, section());
}

TEST(HfTokenizer, WikiTextRawSlow) {
  nibble::test::expect_reference_file(smollm2(), section(), "wiki.test.raw");
}

TEST(HfTokenizer, WikiTextGptqJoinSlow) {
  nibble::test::expect_reference_file(smollm2(), section(), "wiki.test.gptq_join.txt");
}

TEST(HfTokenizer, SpecialIdsFromConfigFiles) {
  EXPECT_EQ(smollm2().bos_id(), 1);  // config.json of SmolLM2-135M-Instruct
  EXPECT_EQ(smollm2().eos_id(), 2);
  EXPECT_EQ(smollm2().vocab_size(), 49152);
  const auto house = nibble::Tokenizer::load(nibble::test::model_path("models/house-49m"));
  EXPECT_EQ(house->bos_id(), 0);  // the house model's config.json: <|endoftext|> both ways
  EXPECT_EQ(house->eos_id(), 0);
}

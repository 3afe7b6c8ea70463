// The Llama-2 tokenizer.model against ids from the sentencepiece library.
#include <gtest/gtest.h>

#include "tokenizer/reference_checks.h"

namespace {

const nlohmann::json& section() { return nibble::test::tokenizer_reference().at("llama2_sp"); }

const nibble::Tokenizer& llama2() {
  static const auto tok =
      nibble::load_sentencepiece(nibble::test::model_path(section().at("tokenizer").get<std::string>()));
  return *tok;
}

}  // namespace

TEST(SentencePiece, ReferenceCases) { nibble::test::expect_reference_cases(llama2(), section()); }

TEST(SentencePiece, WikiTextRawSlow) {
  nibble::test::expect_reference_file(llama2(), section(), "wiki.test.raw");
}

TEST(SentencePiece, SpecialIdsAndVocab) {
  EXPECT_EQ(llama2().bos_id(), 1);
  EXPECT_EQ(llama2().eos_id(), 2);
  EXPECT_EQ(llama2().vocab_size(), 32000);
}

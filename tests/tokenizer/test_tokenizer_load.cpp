// Tokenizer::load picks the implementation from a directory's contents or a file's name, and
// every tokenizer rejects invalid UTF-8.
#include <gtest/gtest.h>

#include "nibble/error.h"
#include "nibble/tokenizer.h"
#include "tokenizer/tokenizer_paths.h"

namespace {

const std::string kText = "The quick brown fox, 1234 \u00e9t\u00e9 \U0001F916.";

}  // namespace

TEST(TokenizerLoad, PicksByDirectoryContents) {
  // tokenizer.json wins in a HF directory; tokenizer.model over tokenizer.bin for Llama-2.
  const auto hf = nibble::Tokenizer::load(nibble::test::smollm2_json().parent_path());
  EXPECT_EQ(hf->encode(kText), nibble::load_hf_tokenizer(nibble::test::smollm2_json())->encode(kText));
  const auto sp = nibble::Tokenizer::load(nibble::test::llama2_model().parent_path());
  EXPECT_EQ(sp->encode(kText), nibble::load_sentencepiece(nibble::test::llama2_model())->encode(kText));
  EXPECT_EQ(sp->vocab_size(), 32000);

  const nibble::test::TempDir dir;
  std::filesystem::copy_file(nibble::test::tok512_bin(), dir.path() / "tokenizer.bin");
  EXPECT_EQ(nibble::Tokenizer::load(dir.path())->vocab_size(), 512);
  EXPECT_THROW(nibble::Tokenizer::load(dir.path() / "nothing-here"), nibble::Error);
  const nibble::test::TempDir empty;
  EXPECT_THROW(nibble::Tokenizer::load(empty.path()), nibble::Error);
}

TEST(TokenizerLoad, PicksByFileName) {
  EXPECT_EQ(nibble::Tokenizer::load(nibble::test::tok512_bin())->vocab_size(), 512);
  EXPECT_EQ(nibble::Tokenizer::load(nibble::test::llama2_bin())->vocab_size(), 32000);
  EXPECT_EQ(nibble::Tokenizer::load(nibble::test::smollm2_json())->vocab_size(), 49152);
  EXPECT_EQ(nibble::Tokenizer::load(nibble::test::llama2_model())->bos_id(), 1);
  const nibble::test::TempDir dir;
  EXPECT_THROW(nibble::Tokenizer::load(dir.write("vocab.txt", "a\nb\n")), nibble::Error);
  EXPECT_THROW(nibble::Tokenizer::load(dir.write("bad.model", "not a protobuf")), nibble::Error);
}

TEST(TokenizerLoad, EveryKindRejectsInvalidUtf8) {
  for (const auto& path : {nibble::test::smollm2_json(), nibble::test::llama2_model(),
                           nibble::test::llama2_bin(), nibble::test::tok512_bin()}) {
    const auto tok = nibble::Tokenizer::load(path);
    EXPECT_THROW(tok->encode("abc\x80"), nibble::Error) << path;
    EXPECT_THROW(tok->encode("\xF0\x9F\xA4"), nibble::Error) << path;
    EXPECT_THROW(tok->encode("\xC0\x80"), nibble::Error) << path;
    EXPECT_FALSE(tok->encode("fine").empty()) << path;
    EXPECT_THROW(tok->decode({tok->vocab_size()}), nibble::Error) << path;
    EXPECT_THROW(tok->token_text(-1), nibble::Error) << path;
  }
}

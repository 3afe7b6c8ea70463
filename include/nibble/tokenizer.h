#pragma once
// Tokenizers: Hugging Face tokenizer.json (byte-level BPE), SentencePiece tokenizer.model, and
// llama2.c tokenizer.bin, behind one interface. encode() never adds BOS/EOS by itself.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nibble {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text -> ids. Invalid UTF-8 throws nibble::Error. Special/added tokens written in the text are
  // matched as the reference libraries do.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The text of one token as it contributes to decoding (for streaming output). Raw bytes: a
  // byte-level or byte-fallback token can hold part of a UTF-8 character, so buffer until the
  // text is complete. SentencePiece-style tokens keep their leading space (decode() drops the
  // first one).
  virtual std::string token_text(int32_t id) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;  // -1 if none

  // Picks by what the directory holds: tokenizer.json, else tokenizer.model, else tokenizer.bin;
  // or by a file's extension (.json / .model / .bin).
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& dir_or_file);
};

// bos/eos come from generation_config.json, config.json, then tokenizer_config.json beside it.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::filesystem::path& tokenizer_json);
std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file);
// vocab_size <= 0 reads as many tokens as the file holds (tokenizer.bin does not store the count).
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::filesystem::path& bin_file,
                                                  int32_t vocab_size);

}  // namespace nibble

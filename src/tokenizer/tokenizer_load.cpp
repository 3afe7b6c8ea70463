// Tokenizer::load: picks the implementation from the file name or the directory's contents.
#include <fmt/format.h>

#include "nibble/error.h"
#include "nibble/tokenizer.h"

namespace nibble {

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& dir_or_file) {
  namespace fs = std::filesystem;
  const fs::path& p = dir_or_file;
  if (fs::is_directory(p)) {
    if (fs::is_regular_file(p / "tokenizer.json")) return load_hf_tokenizer(p / "tokenizer.json");
    if (fs::is_regular_file(p / "tokenizer.model")) return load_sentencepiece(p / "tokenizer.model");
    if (fs::is_regular_file(p / "tokenizer.bin")) return load_llama2c_tokenizer(p / "tokenizer.bin", 0);
    throw Error(fmt::format("{}: no tokenizer.json, tokenizer.model or tokenizer.bin in this directory",
                            p.string()));
  }
  if (!fs::exists(p)) throw Error(fmt::format("{}: no such tokenizer file or directory", p.string()));
  const std::string ext = p.extension().string();
  if (ext == ".json") return load_hf_tokenizer(p);
  if (ext == ".model") return load_sentencepiece(p);
  if (ext == ".bin") return load_llama2c_tokenizer(p, 0);
  throw Error(fmt::format("{}: unknown tokenizer file type (expected .json, .model or .bin)",
                          p.string()));
}

}  // namespace nibble

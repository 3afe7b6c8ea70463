#pragma once
// Access to tokenizer_reference.json and the shared text files for the tokenizer tests.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "nibble/paths.h"

namespace nibble::test {

inline std::string read_file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline const nlohmann::json& tokenizer_reference() {
  static const nlohmann::json j =
      nlohmann::json::parse(read_file_bytes(data_dir() / "reference" / "tokenizer_reference.json"));
  return j;
}

inline std::filesystem::path model_path(const std::string& rel) { return data_dir() / rel; }

}  // namespace nibble::test

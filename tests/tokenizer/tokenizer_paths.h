#pragma once
// The tokenizer files in the shared data directory, and temporary files for malformed inputs.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "nibble/paths.h"

namespace nibble::test {

inline std::filesystem::path smollm2_json() {
  return data_dir() / "models" / "smollm2-135m-instruct-tokenizer" / "tokenizer.json";
}
inline std::filesystem::path llama2_model() {
  return data_dir() / "models" / "llama2-sentencepiece-tokenizer" / "tokenizer.model";
}
inline std::filesystem::path llama2_bin() {
  return data_dir() / "models" / "llama2-sentencepiece-tokenizer" / "tokenizer.bin";
}
inline std::filesystem::path tok512_bin() {
  return data_dir() / "models" / "aidreams260K-llama2c" / "tok512.bin";
}

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("nibble-tok-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path write(const std::string& name, const std::string& bytes) const {
    const auto p = path_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace nibble::test

#pragma once
// Helpers for the io tests: a temporary directory removed at the end, raw file writing (for
// deliberately malformed files), a freshly seeded RNG, and an "error mentions" matcher.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "nibble/error.h"

namespace io_test {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "nibble-io-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline void write_text(const fs::path& p, const std::string& text) { write_bytes(p, text); }

// A safetensors file from a literal header (any text) and a data section of `data_bytes` bytes.
inline void write_raw_safetensors(const fs::path& p, const std::string& header, size_t data_bytes) {
  uint64_t n = header.size();
  std::string bytes(reinterpret_cast<const char*>(&n), 8);
  bytes += header;
  bytes.append(data_bytes, '\x5a');
  write_bytes(p, bytes);
}

// A fresh seed per test, printed so that a failure can be replayed.
class Rng {
 public:
  Rng() : seed_(std::random_device{}()), gen_(seed_) {}
  uint32_t seed() const { return seed_; }
  std::mt19937& gen() { return gen_; }
  float normal() { return std::normal_distribution<float>(0.f, 1.f)(gen_); }
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }
  std::vector<uint8_t> bytes(size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = uint8_t(gen_());
    return v;
  }

 private:
  uint32_t seed_;
  std::mt19937 gen_;
};

// Runs f, expects nibble::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no nibble::Error thrown (expected one mentioning \"" << parts.at(0) << "\")";
  } catch (const nibble::Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nlacks: " << p;
  }
}

}  // namespace io_test

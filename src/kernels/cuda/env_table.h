#pragma once
// A process-wide table of measured launch choices (the GEMV tuning table, the GEMM crossover
// table): set explicitly, or loaded on first use from the file an environment variable names.
// Thread-safe.
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nibble::cuda::detail {

template <class Entry>
class EnvTable {
 public:
  using Parse = std::vector<Entry> (*)(const std::string& path);
  EnvTable(const char* env, Parse parse) : env_(env), parse_(parse) {}

  // The first entry with match(entry) true, if any (loading $env on the first call).
  template <class Match>
  std::optional<Entry> find(const Match& match) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!env_checked_) {
      env_checked_ = true;
      if (const char* path = std::getenv(env_); path && *path) entries_ = parse_(path);
    }
    for (const Entry& e : entries_)
      if (match(e)) return e;
    return std::nullopt;
  }

  void set(std::vector<Entry> entries) {
    std::lock_guard<std::mutex> lock(mu_);
    env_checked_ = true;
    entries_ = std::move(entries);
  }

 private:
  const char* env_;
  Parse parse_;
  std::mutex mu_;
  bool env_checked_ = false;
  std::vector<Entry> entries_;
};

}  // namespace nibble::cuda::detail

#pragma once
// A progress bar on stderr for long work. Draws only when stderr is a terminal (and
// NIBBLE_PROGRESS is not 0); otherwise prints nothing, so logs and CI stay clean.
#include <chrono>
#include <cstdint>
#include <string>

namespace nibble {

class Progress {
 public:
  Progress(std::string label, int64_t total);
  ~Progress();
  void update(int64_t done);   // absolute count
  void add(int64_t n = 1) { update(done_ + n); }
  void finish();

 private:
  std::string label_;
  int64_t total_, done_ = 0;
  bool enabled_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace nibble

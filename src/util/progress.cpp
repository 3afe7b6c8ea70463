#include "nibble/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace nibble {

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)), total_(total > 0 ? total : 1) {
  const char* env = std::getenv("NIBBLE_PROGRESS");
  enabled_ = isatty(fileno(stderr)) && !(env && std::strcmp(env, "0") == 0);
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { finish(); }

void Progress::update(int64_t done) {
  done_ = done;
  if (!enabled_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (done_ < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  double frac = double(done_) / double(total_);
  double secs = std::chrono::duration<double>(now - start_).count();
  double eta = frac > 0 ? secs * (1 - frac) / frac : 0;
  constexpr int kWidth = 30;
  int filled = int(frac * kWidth);
  std::fprintf(stderr, "\r%s [%.*s%*s] %3.0f%% %lld/%lld %.1fs eta %.1fs ", label_.c_str(), filled,
               "##############################", kWidth - filled, "", frac * 100,
               (long long)done_, (long long)total_, secs, eta);
  std::fflush(stderr);
}

void Progress::finish() {
  if (finished_) return;
  if (enabled_) {
    update(done_);
    std::fputc('\n', stderr);
  }
  finished_ = true;
}

}  // namespace nibble

// ReSET (../shared/RESET.md): per-token temperature from token entropy and a hybrid step-entropy
// estimate, with O(1) bookkeeping.
#include <cmath>
#include <string>
#include <tuple>

#include "nibble/error.h"
#include "nibble/sampler.h"

namespace nibble {

namespace {

void require(bool ok, const char* field, double value, const char* range) {
  if (!ok)
    throw Error(std::string("reset sampler: ") + field + " must be " + range + ", got " +
                std::to_string(value));
}

}  // namespace

void validate(const ResetParams& p) {
  require(std::isfinite(p.t_low) && p.t_low > 0, "t_low", p.t_low, "finite and > 0");
  require(std::isfinite(p.t_high) && p.t_high > 0, "t_high", p.t_high, "finite and > 0");
  require(std::isfinite(p.tau0) && p.tau0 >= 0, "tau0", p.tau0, "finite and >= 0");
  require(p.window >= 1, "window", p.window, ">= 1");
  require(p.top_p > 0 && p.top_p <= 1, "top_p", p.top_p, "in (0, 1]");
}

ResetController::ResetController(const ResetParams& params, TokenTextFn token_text)
    : p_(params), text_(std::move(token_text)) {
  validate(p_);
  if (!text_) throw Error("reset sampler: needs the tokenizer's token texts to find steps");
  ring_.assign(size_t(p_.window), 0.0);
}

ResetDecision ResetController::decide(const float* logits, int64_t n) {
  return decide_entropy(entropy_nats(logits, n));
}

ResetDecision ResetController::decide_entropy(double entropy) {
  if (pending_) throw Error("reset sampler: decide() called twice without accept()");
  if (!std::isfinite(entropy) || entropy < 0)
    throw Error("reset sampler: entropy must be finite and >= 0, got " + std::to_string(entropy));
  ResetDecision d;
  d.entropy = entropy;
  if (t_ == 0) {
    d.h_step = d.entropy;  // nothing seen yet
    d.h_bar = d.h_step;    // the first step counts as confident
  } else {
    std::tie(d.h_step, d.h_bar) = step_signals();
  }
  d.uncertain_step = d.h_step > d.h_bar;
  d.temperature = d.entropy >= next_threshold() ? p_.t_high : p_.t_low;
  pending_ = d.entropy;
  return d;
}

std::pair<double, double> ResetController::step_signals() const {
  const int64_t w = p_.window;
  const double h_step = step_n_ < w ? window_sum_ / double(std::min(t_, w)) : step_sum_ / double(step_n_);
  return {h_step, total_sum_ / double(t_)};
}

double ResetController::next_threshold() const {
  if (t_ == 0) return p_.tau0;  // the first token counts as a confident step
  const auto [h_step, h_bar] = step_signals();
  return h_step > h_bar ? h_step : p_.tau0;
}

void ResetController::accept(int32_t token) {
  if (!pending_) throw Error("reset sampler: accept() called without decide()");
  const double h = *pending_;
  pending_.reset();
  const int64_t w = p_.window;
  const size_t slot = size_t(t_ % w);
  total_sum_ += h;
  if (t_ >= w) window_sum_ -= ring_[slot];
  ring_[slot] = h;
  window_sum_ += h;
  if (slot == size_t(w - 1)) {
    // the ring is in time order now: resum it so rounding from the subtractions never builds up
    window_sum_ = 0;
    for (double x : ring_) window_sum_ += x;
  }
  if (ends_step(token)) {
    step_sum_ = 0;
    step_n_ = 0;
  } else {
    step_sum_ += h;
    ++step_n_;
  }
  ++t_;
}

bool ResetController::ends_step(int32_t token) {
  const std::string text = text_(token);
  const bool newline = text == "\n";
  const bool ends = text.find("\n\n") != std::string::npos || (newline && prev_was_newline_);
  prev_was_newline_ = newline;
  return ends;
}

}  // namespace nibble

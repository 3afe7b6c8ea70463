// Batch::step and what reads its logits on the device: entropies, sampling.
#include <fmt/format.h>

#include <cmath>

#include "model/cuda/batch_impl.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

void check_step(const Batch::Impl& b, std::span<const int> slots, std::span<const int32_t> tokens) {
  const char* what = "Batch::step";
  if (slots.size() != tokens.size())
    throw Error(fmt::format("{}: {} slots but {} tokens", what, slots.size(), tokens.size()));
  if (tokens.empty() || int64_t(tokens.size()) > b.max_batch)
    throw Error(fmt::format("{}: {} rows, expected 1..{} (max_batch)", what, tokens.size(), b.max_batch));
  std::vector<bool> seen(size_t(b.max_batch), false);
  for (int s : slots) {
    b.check_slot(s, what);
    if (seen[size_t(s)]) throw Error(fmt::format("{}: slot {} appears twice in one step", what, s));
    seen[size_t(s)] = true;
    if (b.positions[size_t(s)] + 1 > b.max_ctx)
      throw Error(fmt::format("context overflow: position {} + 1 token exceeds the batch's max context {} (slot {})",
                              b.positions[size_t(s)], b.max_ctx, s));
  }
  b.check_tokens(tokens, what);
}

void check_params(std::span<const SampleParams> params, int rows) {
  if (rows == 0) throw Error("Batch::sample: no logits to sample from (run step() or prefill() first)");
  if (int(params.size()) != rows)
    throw Error(fmt::format("Batch::sample: {} parameter sets for {} rows of logits", params.size(), rows));
  for (size_t i = 0; i < params.size(); ++i) {
    const SampleParams& p = params[i];
    if (!std::isfinite(p.temperature))
      throw Error(fmt::format("Batch::sample: row {}: temperature {} is not finite", i, p.temperature));
    if (!(p.top_p > 0 && p.top_p <= 1))
      throw Error(fmt::format("Batch::sample: row {}: top_p {} is outside (0, 1]", i, p.top_p));
    if (!(p.u >= 0 && p.u < 1)) throw Error(fmt::format("Batch::sample: row {}: u {} is outside [0, 1)", i, p.u));
  }
}

// Checks a step and uploads its rows; end_step then advances the slots.
void begin_step(Batch::Impl& b, std::span<const int> slots, std::span<const int32_t> tokens) {
  check_step(b, slots, tokens);
  const size_t B = tokens.size();
  std::vector<int32_t> slot_h(slots.begin(), slots.end()), pos_h(B);
  for (size_t i = 0; i < B; ++i) pos_h[i] = b.positions[size_t(slots[i])];
  b.last_rows = 0;
  b.upload_rows(tokens, slot_h, pos_h);
}

void end_step(Batch::Impl& b, std::span<const int> slots) {
  for (int s : slots) ++b.positions[size_t(s)];
  b.last_rows = int(slots.size());
}

}  // namespace

void Batch::step(std::span<const int> slots, std::span<const int32_t> tokens) {
  begin_step(*p_, slots, tokens);
  p_->decode_step(int(tokens.size()));
  end_step(*p_, slots);
}

std::vector<OpTime> Batch::profile_step(std::span<const int> slots, std::span<const int32_t> tokens) {
  Impl& b = *p_;
  begin_step(b, slots, tokens);
  StepProfiler prof(b.stream);
  b.profiler = &prof;
  struct Unset {
    Impl& b;
    ~Unset() { b.profiler = nullptr; }
  } unset{b};
  b.forward(int(tokens.size()), true, 0, 0, int(tokens.size()), b.decode_ws);
  std::vector<OpTime> times = prof.finish();
  end_step(b, slots);
  return times;
}

std::vector<float> Batch::logits() const {
  const Impl& b = *p_;
  std::vector<float> out(size_t(b.last_rows) * size_t(b.m.vocab));
  if (!out.empty()) b.copy_to_host(out.data(), b.logits.get(), out.size() * sizeof(float));
  return out;
}

std::vector<float> Batch::entropies() const {
  const Impl& b = *p_;
  std::vector<float> out(size_t(b.last_rows));
  if (out.empty()) return out;
  ops::logits_entropy_argmax(b.logits.get(), b.last_rows, int(b.m.vocab), b.entropy.get(), nullptr,
                             b.logits_ws.get(), b.stream);
  b.copy_to_host(out.data(), b.entropy.get(), out.size() * sizeof(float));
  return out;
}

std::vector<int32_t> Batch::sample(std::span<const SampleParams> params) {
  Impl& b = *p_;
  const int B = b.last_rows;
  check_params(params, B);
  const size_t n = params.size();
  std::vector<float> t(n), tp(n), u(n);
  for (size_t i = 0; i < n; ++i) t[i] = params[i].temperature, tp[i] = params[i].top_p, u[i] = params[i].u;
  const size_t bytes = n * sizeof(float);
  NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b.temperature.get(), t.data(), bytes, cudaMemcpyHostToDevice, b.stream));
  NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b.top_p.get(), tp.data(), bytes, cudaMemcpyHostToDevice, b.stream));
  NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b.u.get(), u.data(), bytes, cudaMemcpyHostToDevice, b.stream));
  ops::sample(b.logits.get(), B, int(b.m.vocab), b.temperature.get(), b.top_p.get(), b.u.get(), b.sampled.get(),
              b.logits_ws.get(), b.stream);
  std::vector<int32_t> out(n);
  b.copy_to_host(out.data(), b.sampled.get(), out.size() * sizeof(int32_t));
  return out;
}

std::vector<float> Batch::decode(std::span<const int> slots, std::span<const int32_t> tokens) {
  step(slots, tokens);
  return logits();
}

}  // namespace nibble::cuda

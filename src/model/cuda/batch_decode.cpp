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

template <class T>
void to_device(T* dst, const std::vector<T>& src, cudaStream_t stream) {
  NIBBLE_CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
}

// Temperature + top-p sampling of the last step's rows from b.temperature / top_p / u; with
// `entropies`, the device entropies come back in the same synchronization.
std::vector<int32_t> sample_rows(Batch::Impl& b, std::vector<float>* entropies = nullptr) {
  ops::sample(b.logits.get(), b.last_rows, int(b.m.vocab), b.temperature.get(), b.top_p.get(), b.u.get(),
              b.sampled.get(), b.logits_ws.get(), b.stream);
  const size_t n = size_t(b.last_rows);
  std::vector<int32_t> out(n);
  if (entropies) {
    entropies->resize(n);
    NIBBLE_CUDA_CHECK(cudaMemcpyAsync(entropies->data(), b.entropy.get(), n * sizeof(float), cudaMemcpyDeviceToHost,
                                      b.stream));
  }
  b.copy_to_host(out.data(), b.sampled.get(), n * sizeof(int32_t));  // synchronizes
  return out;
}

std::vector<int32_t> Batch::sample(std::span<const SampleParams> params) {
  Impl& b = *p_;
  check_params(params, b.last_rows);
  const size_t n = params.size();
  std::vector<float> t(n), tp(n), u(n);
  for (size_t i = 0; i < n; ++i) t[i] = params[i].temperature, tp[i] = params[i].top_p, u[i] = params[i].u;
  to_device(b.temperature.get(), t, b.stream), to_device(b.top_p.get(), tp, b.stream), to_device(b.u.get(), u, b.stream);
  return sample_rows(b);
}

EntropyRule entropy_rule(const ResetController& ctl, float u) {
  const ResetParams& p = ctl.params();
  return {ctl.next_threshold(), float(p.t_low), float(p.t_high), float(p.top_p), u};
}

std::vector<int32_t> Batch::sample_by_entropy(std::span<const EntropyRule> rules, std::vector<float>* entropies) {
  Impl& b = *p_;
  const int B = b.last_rows;
  std::vector<SampleParams> as_params;  // the checks of sample(), on the parts they share
  for (const EntropyRule& r : rules) as_params.push_back({r.t_high, r.top_p, r.u});
  check_params(as_params, B);
  const size_t n = rules.size();
  std::vector<double> thr(n);
  std::vector<float> lo(n), hi(n), tp(n), u(n);
  for (size_t i = 0; i < n; ++i) {
    const EntropyRule& r = rules[i];
    if (!std::isfinite(r.threshold) || !std::isfinite(r.t_low))
      throw Error(fmt::format("Batch::sample_by_entropy: row {}: threshold or t_low is not finite", i));
    thr[i] = r.threshold, lo[i] = r.t_low, hi[i] = r.t_high, tp[i] = r.top_p, u[i] = r.u;
  }
  to_device(b.threshold.get(), thr, b.stream), to_device(b.t_low.get(), lo, b.stream);
  to_device(b.t_high.get(), hi, b.stream), to_device(b.top_p.get(), tp, b.stream), to_device(b.u.get(), u, b.stream);
  ops::logits_entropy_argmax(b.logits.get(), B, int(b.m.vocab), b.entropy.get(), nullptr, b.logits_ws.get(), b.stream);
  ops::entropy_temperature(b.entropy.get(), b.threshold.get(), b.t_low.get(), b.t_high.get(), B, b.temperature.get(),
                           b.stream);
  return sample_rows(b, entropies);
}

std::vector<float> Batch::decode(std::span<const int> slots, std::span<const int32_t> tokens) {
  step(slots, tokens);
  return logits();
}

}  // namespace nibble::cuda

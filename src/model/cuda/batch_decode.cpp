// Batch::step and what reads its logits on the device: entropies, sampling.
#include <fmt/format.h>

#include <algorithm>
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
    if (p.top_k < 0) throw Error(fmt::format("Batch::sample: row {}: top_k {} is negative", i, p.top_k));
    if (!(p.min_p >= 0 && p.min_p <= 1))
      throw Error(fmt::format("Batch::sample: row {}: min_p {} is outside [0, 1]", i, p.min_p));
  }
}

// Checks a step and uploads its rows; end_step then advances the slots.
void begin_step(Batch::Impl& b, std::span<const int> slots, std::span<const int32_t> tokens) {
  check_step(b, slots, tokens);
  const size_t B = tokens.size();
  std::vector<int32_t> slot_h(slots.begin(), slots.end()), pos_h(B);
  for (size_t i = 0; i < B; ++i) pos_h[i] = b.positions[size_t(slots[i])];
  const int top = B ? *std::max_element(pos_h.begin(), pos_h.end()) : 0;
  int hint = 255;
  while (hint < top) hint = 2 * hint + 1;
  b.attn_hint = std::min(hint, b.max_ctx - 1);
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

namespace {

// Draws the last step's rows from the inputs staged in b.sample_h (rows [0, n)): one copy there,
// the three sampling kernels, the tokens (and with `entropies` the entropies) back in one
// synchronization.
std::vector<int32_t> sample_staged(Batch::Impl& b, ops::SampleRule rule, std::vector<float>* entropies) {
  const size_t n = size_t(b.last_rows);
  NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b.sample_d.get(), b.sample_h.get(), n * sizeof(ops::SampleRow),
                                    cudaMemcpyHostToDevice, b.stream));
  ops::sample(b.logits.get(), b.last_rows, int(b.m.vocab), b.sample_d.get(), rule, b.sampled.get(),
              entropies ? b.entropy.get() : nullptr, b.logits_ws.get(), b.stream);
  NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b.sampled_h.get(), b.sampled.get(), n * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                    b.stream));
  if (entropies)
    NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b.entropy_h.get(), b.entropy.get(), n * sizeof(float), cudaMemcpyDeviceToHost,
                                      b.stream));
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(b.stream));
  if (entropies) entropies->assign(b.entropy_h.get(), b.entropy_h.get() + n);
  return std::vector<int32_t>(b.sampled_h.get(), b.sampled_h.get() + n);
}

}  // namespace

std::vector<int32_t> Batch::sample(std::span<const SampleParams> params) {
  Impl& b = *p_;
  check_params(params, b.last_rows);
  for (size_t i = 0; i < params.size(); ++i)
    b.sample_h.get()[i] = {params[i].temperature, params[i].top_p, params[i].u, 0.0f, params[i].top_k,
                           params[i].min_p, 0.0};
  return sample_staged(b, ops::SampleRule::fixed, nullptr);
}

EntropyRule entropy_rule(const ResetController& ctl, float u) {
  const ResetParams& p = ctl.params();
  return {ctl.next_threshold(), float(p.t_low), float(p.t_high), float(p.top_p), u};
}

std::vector<int32_t> Batch::sample_by_entropy(std::span<const EntropyRule> rules, std::vector<float>* entropies) {
  Impl& b = *p_;
  std::vector<SampleParams> as_params;  // the checks of sample(), on the parts they share
  for (const EntropyRule& r : rules) as_params.push_back({r.t_high, r.top_p, r.u});
  check_params(as_params, b.last_rows);
  for (size_t i = 0; i < rules.size(); ++i) {
    const EntropyRule& r = rules[i];
    if (!std::isfinite(r.threshold) || !std::isfinite(r.t_low))
      throw Error(fmt::format("Batch::sample_by_entropy: row {}: threshold or t_low is not finite", i));
    b.sample_h.get()[i] = {r.t_high, r.top_p, r.u, r.t_low, 0, 0.0f, r.threshold};
  }
  return sample_staged(b, ops::SampleRule::entropy, entropies);
}

std::vector<float> Batch::decode(std::span<const int> slots, std::span<const int32_t> tokens) {
  step(slots, tokens);
  return logits();
}

}  // namespace nibble::cuda

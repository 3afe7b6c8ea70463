// Sampler: the configured rule (greedy, tempered + filters, ReSET) behind one call per token.
#include <cmath>
#include <string>

#include "nibble/error.h"
#include "nibble/sampler.h"

namespace nibble {

namespace {

void require(bool ok, const char* field, double value, const char* range) {
  if (!ok)
    throw Error(std::string("sampler: ") + field + " must be " + range + ", got " +
                std::to_string(value));
}

}  // namespace

void validate(const SamplerConfig& cfg) {
  require(std::isfinite(cfg.temperature) && cfg.temperature >= 0, "temperature", cfg.temperature,
          "finite and >= 0");
  require(cfg.top_k >= 0, "top_k", cfg.top_k, ">= 0");
  require(cfg.top_p > 0 && cfg.top_p <= 1, "top_p", cfg.top_p, "in (0, 1]");
  require(cfg.min_p >= 0 && cfg.min_p <= 1, "min_p", cfg.min_p, "in [0, 1]");
  if (cfg.kind == SamplerKind::Reset) validate(cfg.reset);
}

Sampler::Sampler(const SamplerConfig& cfg, TokenTextFn token_text) : cfg_(cfg), rng_(cfg.seed) {
  validate(cfg_);
  if (cfg_.kind == SamplerKind::Reset) reset_.emplace(cfg_.reset, std::move(token_text));
}

int32_t Sampler::sample(const float* logits, int64_t n) {
  switch (cfg_.kind) {
    case SamplerKind::Greedy:
      return argmax(logits, n);
    case SamplerKind::Default:
      if (cfg_.temperature == 0) return argmax(logits, n);
      return sample_tempered(logits, n, cfg_.temperature, cfg_.top_k, cfg_.top_p, cfg_.min_p);
    case SamplerKind::Reset: {
      last_ = reset_->decide(logits, n);
      int32_t token = sample_tempered(logits, n, last_->temperature, 0, cfg_.reset.top_p, 0);
      reset_->accept(token);
      return token;
    }
  }
  throw Error("sampler: unknown kind");
}

int32_t Sampler::sample_tempered(const float* logits, int64_t n, double temperature, int top_k,
                                 double top_p, double min_p) {
  std::vector<Candidate> c = softmax_candidates(logits, n, temperature);
  keep_top_k(c, top_k);
  keep_top_p(c, top_p);
  keep_min_p(c, min_p);
  return draw(c, rng_);
}

}  // namespace nibble

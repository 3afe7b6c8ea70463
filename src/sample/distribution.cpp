// Softmax-based quantities of one logit vector: entropy, argmax, tempered probabilities.
#include <cmath>
#include <string>

#include "nibble/error.h"
#include "nibble/sampler.h"
#include "sample/logits_check.h"

namespace nibble {

namespace detail {

float checked_max_logit(const float* logits, int64_t n) {
  if (n <= 0) throw Error("logits: empty vector");
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    float z = logits[i];
    if (std::isnan(z) || z == INFINITY)
      throw Error("logits: " + std::string(std::isnan(z) ? "NaN" : "+inf") + " at index " +
                  std::to_string(i));
    if (z > m) m = z;
  }
  if (m == -INFINITY) throw Error("logits: every entry is -inf");
  return m;
}

}  // namespace detail

double entropy_nats(const float* logits, int64_t n) {
  const double m = detail::checked_max_logit(logits, n);
  // H = log Z - sum(e^a a) / Z with a = z - max, Z = sum e^a
  double z_sum = 0, za_sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (logits[i] == -INFINITY) continue;
    double a = double(logits[i]) - m;
    double e = std::exp(a);
    z_sum += e;
    za_sum += e * a;
  }
  return std::log(z_sum) - za_sum / z_sum;
}

int32_t argmax(const float* logits, int64_t n) {
  detail::checked_max_logit(logits, n);
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

std::vector<Candidate> softmax_candidates(const float* logits, int64_t n, double temperature) {
  if (!(temperature > 0) || !std::isfinite(temperature))
    throw Error("sampler: temperature must be finite and > 0, got " + std::to_string(temperature));
  const double m = detail::checked_max_logit(logits, n);
  std::vector<Candidate> c(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    double e = logits[i] == -INFINITY ? 0.0 : std::exp((double(logits[i]) - m) / temperature);
    c[size_t(i)] = {int32_t(i), e};
    sum += e;
  }
  for (auto& x : c) x.prob /= sum;
  return c;
}

}  // namespace nibble

#pragma once
// Deliberately simple float64 references for the sampler tests, written apart from src/sample:
// explicit probabilities, brute-force O(n^2) filters, and ReSET recomputed from scratch per token.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace ref {

inline std::vector<double> softmax(const std::vector<float>& z, double temperature = 1.0) {
  double m = -INFINITY;
  for (float v : z) m = std::max(m, double(v));
  std::vector<double> p(z.size());
  double sum = 0;
  for (size_t i = 0; i < z.size(); ++i) sum += p[i] = std::exp((double(z[i]) - m) / temperature);
  for (double& v : p) v /= sum;
  return p;
}

inline double entropy(const std::vector<double>& p) {
  double h = 0;
  for (double v : p)
    if (v > 0) h -= v * std::log(v);
  return h;
}

// Does token a rank strictly ahead of token b (higher probability, or equal and lower id)?
inline bool ahead(const std::vector<double>& p, size_t a, size_t b) {
  return p[a] > p[b] || (p[a] == p[b] && a < b);
}

inline std::set<int32_t> top_k(const std::vector<double>& p, int k) {
  std::set<int32_t> keep;
  for (size_t i = 0; i < p.size(); ++i) {
    int better = 0;
    for (size_t j = 0; j < p.size(); ++j) better += ahead(p, j, i);
    if (k <= 0 || better < k) keep.insert(int32_t(i));
  }
  return keep;
}

// A token survives top-p iff the mass of the tokens ranked ahead of it is still below p.
inline std::set<int32_t> top_p(const std::vector<double>& p, double pp) {
  std::set<int32_t> keep;
  for (size_t i = 0; i < p.size(); ++i) {
    double mass_ahead = 0;
    for (size_t j = 0; j < p.size(); ++j)
      if (ahead(p, j, i)) mass_ahead += p[j];
    if (pp >= 1 || mass_ahead < pp) keep.insert(int32_t(i));
  }
  return keep;
}

inline std::set<int32_t> min_p(const std::vector<double>& p, double pp) {
  double mx = *std::max_element(p.begin(), p.end());
  std::set<int32_t> keep;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] >= pp * mx) keep.insert(int32_t(i));
  return keep;
}

// p restricted to `keep` and renormalized (zeros elsewhere).
inline std::vector<double> restrict(const std::vector<double>& p, const std::set<int32_t>& keep) {
  std::vector<double> q(p.size(), 0.0);
  double sum = 0;
  for (int32_t i : keep) sum += p[size_t(i)];
  for (int32_t i : keep) q[size_t(i)] = p[size_t(i)] / sum;
  return q;
}

struct ResetSignals {
  double entropy, h_step, h_bar, temperature;
};

inline double mean(const std::vector<double>& h, size_t lo, size_t hi) {  // mean of h[lo, hi)
  double s = 0;
  for (size_t i = lo; i < hi; ++i) s += h[i];
  return s / double(hi - lo);
}

// ReSET for token t, from all entropies H_0..H_t and the texts of tokens 0..t-1, recomputing
// the step start and every mean from scratch.
inline ResetSignals reset_signals(const std::vector<double>& H, const std::vector<std::string>& text,
                                  size_t t, size_t w, double t_low, double t_high, double tau0) {
  size_t t0 = 0;  // start of the step holding t: the last position s <= t that starts a step
  for (size_t s = 1; s <= t; ++s) {
    bool starts = text[s - 1].find("\n\n") != std::string::npos ||
                  (s >= 2 && text[s - 1] == "\n" && text[s - 2] == "\n");
    if (starts) t0 = s;
  }
  ResetSignals r{};
  r.entropy = H[t];
  if (t == 0) {
    r.h_step = H[0];
  } else if (t - t0 < w) {
    r.h_step = mean(H, t >= w ? t - w : 0, t);
  } else {
    r.h_step = mean(H, t0, t);
  }
  r.h_bar = t == 0 ? r.h_step : mean(H, 0, t);
  if (r.h_step > r.h_bar)
    r.temperature = H[t] >= r.h_step ? t_high : t_low;
  else
    r.temperature = H[t] >= tau0 ? t_high : t_low;
  return r;
}

}  // namespace ref

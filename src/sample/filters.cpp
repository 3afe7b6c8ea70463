// Truncation filters over candidate lists (top-k, top-p, min-p) and the weighted draw.
#include <algorithm>
#include <cmath>
#include <string>

#include "nibble/error.h"
#include "nibble/sampler.h"

namespace nibble {

namespace {

// The sampler's ranking: higher probability first, then lower id.
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.prob != b.prob ? a.prob > b.prob : a.id < b.id;
}

void renormalize(std::vector<Candidate>& c) {
  double sum = 0;
  for (const auto& x : c) sum += x.prob;
  if (sum > 0)
    for (auto& x : c) x.prob /= sum;
}

}  // namespace

void keep_top_k(std::vector<Candidate>& c, int k) {
  if (k <= 0 || size_t(k) >= c.size()) return;
  std::nth_element(c.begin(), c.begin() + (k - 1), c.end(), ranks_before);
  c.resize(size_t(k));
  renormalize(c);
}

void keep_top_p(std::vector<Candidate>& c, double p) {
  if (p >= 1 || c.empty()) return;
  if (!(p > 0)) throw Error("sampler: top_p must be in (0, 1], got " + std::to_string(p));
  // Usually the kept set is short: rank a head of 256 first.
  const size_t head = std::min<size_t>(c.size(), 256);
  std::partial_sort(c.begin(), c.begin() + ptrdiff_t(head), c.end(), ranks_before);
  double mass = 0;
  for (size_t i = 0; i < head; ++i) {
    mass += c[i].prob;
    if (mass >= p) {
      c.resize(i + 1);
      renormalize(c);
      return;
    }
  }
  // Else quickselect on mass over the rest (it can be thousands of tokens): c[0, lo) holds the
  // lo best tokens, whose mass p - need is below p, and the cut lies in (lo, hi]. If rounding
  // leaves the total under p, the cut ends at the end: everything is kept.
  size_t lo = head, hi = c.size();
  double need = p - mass;
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(c.begin() + ptrdiff_t(lo), c.begin() + ptrdiff_t(mid),
                     c.begin() + ptrdiff_t(hi), ranks_before);
    double part = 0;
    for (size_t i = lo; i < mid; ++i) part += c[i].prob;
    if (part >= need) {
      hi = mid;
    } else {
      need -= part;
      lo = mid;
    }
  }
  c.resize(hi);
  renormalize(c);
}

void keep_min_p(std::vector<Candidate>& c, double p) {
  if (p <= 0 || c.empty()) return;
  if (p > 1) throw Error("sampler: min_p must be in [0, 1], got " + std::to_string(p));
  double max_prob = 0;
  for (const auto& x : c) max_prob = std::max(max_prob, x.prob);
  const double cut = p * max_prob;
  std::erase_if(c, [cut](const Candidate& x) { return x.prob < cut; });
  renormalize(c);
}

int32_t draw(const std::vector<Candidate>& c, std::mt19937_64& rng) {
  if (c.empty()) throw Error("sampler: no candidate token to draw from");
  double total = 0;
  for (const auto& x : c) total += x.prob;
  // 53 random bits -> u in [0, 1), scaled to the (nearly 1) total mass
  const double u = double(rng() >> 11) * 0x1p-53 * total;
  double cum = 0;
  int64_t last_nonzero = -1;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].prob <= 0) continue;
    cum += c[i].prob;
    last_nonzero = int64_t(i);
    if (u < cum) return c[i].id;
  }
  if (last_nonzero < 0) throw Error("sampler: every candidate has probability 0");
  return c[size_t(last_nonzero)].id;  // u landed past the rounded total
}

}  // namespace nibble

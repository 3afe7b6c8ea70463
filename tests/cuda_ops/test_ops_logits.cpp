// Entropy/argmax, token NLL and the sampler vs float64 references on fresh random logits.
// Entropy and NLL: relative error <= 1e-4 (+1e-7 absolute for exact zeros). The sampler must pick
// exactly the reference's token for the same u: logits are spaced so that no two probabilities are
// near-equal, and (u, top_p) pairs that land within 1e-5 of a cumulative-mass boundary are
// redrawn (the GPU's FP32 exponentials differ from float64 by ~1e-7).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "nibble/cuda/ops.h"
#include "nibble/error.h"
#include "ops_test_util.h"

namespace nibble::cuda::test {
namespace {

namespace ops = nibble::cuda::ops;

class OpsLogits : public SeededTest {
 protected:
  // Distinct logits: a random permutation of an evenly spaced grid of the given span, + offset.
  std::vector<float> spaced_logits(int V, double span, double offset) {
    std::vector<int> perm(static_cast<size_t>(V));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen);
    std::vector<float> z(static_cast<size_t>(V));
    for (int i = 0; i < V; ++i) z[size_t(i)] = float(offset + span * perm[size_t(i)] / std::max(1, V - 1));
    return z;
  }
};

struct RefStats {
  double entropy;
  int argmax;
};

RefStats ref_stats(const float* z, int V) {
  int best = 0;
  for (int i = 1; i < V; ++i)
    if (z[i] > z[best]) best = i;
  const double m = z[best];
  double zs = 0, za = 0;
  for (int i = 0; i < V; ++i) {
    if (z[i] == -INFINITY) continue;
    const double e = std::exp(double(z[i]) - m);
    zs += e, za += e * (double(z[i]) - m);
  }
  return {std::log(zs) - za / zs, best};
}

TEST_F(OpsLogits, EntropyAndArgmax) {
  // few rows of a large vocabulary: split over many CTAs (entropy_workspace_bytes)
  for (auto [B, V] : {std::pair{1, 1}, {3, 7}, {64, 1000}, {3, 151936}, {1, 128256}, {2, 50001}}) {
    std::vector<float> z(size_t(B) * V);
    for (int b = 0; b < B; ++b) {
      const float sd = float(0.3 + 6 * uniform());
      for (int i = 0; i < V; ++i) z[size_t(b) * V + i] = normal(sd);
    }
    if (V > 3) {
      z[2] = z[V - 1] = 1e4f;  // row 0: tied maximum, lowest index wins
      z[size_t(V) + 1] = -INFINITY;
    }
    if (B > 1 && V > 40000)  // whole chunks of -inf (masked tokens) add nothing
      for (int i = 0; i < 30000; ++i) z[size_t(V) + i] = -INFINITY;
    GpuBuffer<float> dz(z), ent(static_cast<size_t>(B));
    GpuBuffer<int32_t> arg(static_cast<size_t>(B));
    ent.poison();
    arg.poison();
    GpuBuffer<uint8_t> ws(ops::entropy_workspace_bytes(B, V));
    ops::logits_entropy_argmax(dz.get(), B, V, ent.get(), arg.get(), ws.get(), nullptr);
    const auto ge = ent.host();
    const auto ga = arg.host();
    CloseCheck check("entropy V=" + std::to_string(V));
    for (int b = 0; b < B; ++b) {
      const RefStats r = ref_stats(&z[size_t(b) * V], V);
      check(ge[size_t(b)], r.entropy, 1e-4 * std::fabs(r.entropy) + 1e-7, "row " + std::to_string(b));
      EXPECT_EQ(ga[size_t(b)], r.argmax) << "row " << b << " V=" << V;
    }
  }
}

TEST_F(OpsLogits, TokenNll) {
  for (auto [T, V] : {std::pair{1, 1}, {7, 33}, {37, 32000}, {2, 151936}}) {
    std::vector<float> z(size_t(T) * V);
    for (auto& v : z) v = normal(3.0f);
    std::vector<int32_t> target(static_cast<size_t>(T));
    for (auto& t : target) t = uniform_int(0, V - 1);
    target[0] = V - 1;
    if (T > 1) target[1] = 0;
    GpuBuffer<float> dz(z), nll(static_cast<size_t>(T));
    GpuBuffer<int32_t> dt(target);
    nll.poison();
    ops::token_nll(dz.get(), T, V, dt.get(), nll.get(), nullptr);
    const auto got = nll.host();
    CloseCheck check("token_nll V=" + std::to_string(V));
    for (int t = 0; t < T; ++t) {
      const float* zr = &z[size_t(t) * V];
      const double m = *std::max_element(zr, zr + V);
      double s = 0;
      for (int i = 0; i < V; ++i) s += std::exp(double(zr[i]) - m);
      const double ref = m + std::log(s) - zr[target[size_t(t)]];
      check(got[size_t(t)], ref, 1e-4 * std::fabs(ref) + 1e-7, "row " + std::to_string(t));
    }
  }
}

// The reference sampler: sort by (probability desc, id asc); keep the first top_k (0: all), then
// the shortest prefix of those whose mass reaches top_p of theirs, then drop the tokens below
// min_p x the top probability; return the first token whose cumulative mass exceeds u * kept.
// *margin: the distance (relative to the total) of the cuts and of u * kept from the nearest
// cumulative boundary, and of each probability from min_p x the top one.
int ref_sample(const float* z, int V, double temp, double top_p, double u, double* margin, int top_k = 0,
               double min_p = 0) {
  *margin = 1;
  if (temp <= 0) return int(std::max_element(z, z + V) - z);
  const double m = *std::max_element(z, z + V);
  std::vector<double> p(static_cast<size_t>(V));
  double sum = 0;
  for (int i = 0; i < V; ++i) sum += (p[size_t(i)] = std::exp((double(z[i]) - m) / temp));
  for (double& x : p) x /= sum;
  std::vector<int> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
  size_t k = top_k > 0 ? std::min<size_t>(size_t(top_k), order.size()) : order.size();
  double kept = 0;
  for (size_t i = 0; i < k; ++i) kept += p[size_t(order[i])];
  if (top_p < 1) {
    double cum = 0;
    for (size_t i = 0; i < k; ++i) {
      const double before = cum;
      cum += p[size_t(order[i])];
      *margin = std::min({*margin, std::fabs(cum - top_p * kept), std::fabs(before - top_p * kept)});
      if (cum >= top_p * kept) {
        k = i + 1;
        break;
      }
    }
    kept = cum;
  }
  if (min_p > 0) {
    const double cut = min_p * p[size_t(order[0])];
    size_t n = 0;
    kept = 0;
    for (size_t i = 0; i < k; ++i) {
      *margin = std::min(*margin, std::fabs(p[size_t(order[i])] - cut) / p[size_t(order[0])]);
      if (p[size_t(order[i])] >= cut) ++n, kept += p[size_t(order[i])];
    }
    k = n;
  }
  const double r = u * kept;
  double cum = 0;
  for (size_t i = 0; i < k; ++i) {
    cum += p[size_t(order[i])];
    if (r < cum) {
      *margin = std::min({*margin, cum - r, r - (cum - p[size_t(order[i])])});
      return order[i];
    }
  }
  return order[k - 1];
}

struct SampleRow {
  float temp, top_p, u;
  int top_k = 0;
  float min_p = 0;
};

std::vector<ops::SampleRow> fixed_rows(const std::vector<SampleRow>& rows) {
  std::vector<ops::SampleRow> out;
  for (const SampleRow& r : rows) out.push_back({r.temp, r.top_p, r.u, 0.0f, r.top_k, r.min_p, 0.0});
  return out;
}

// Runs the GPU sampler on B rows of z (twice: the same ids every run) and compares each row with
// ref_sample.
void expect_samples(const std::vector<float>& z, int B, int V, const std::vector<SampleRow>& rows) {
  GpuBuffer<float> dz(z);
  GpuBuffer<ops::SampleRow> dr(fixed_rows(rows));
  GpuBuffer<int32_t> out(static_cast<size_t>(B));
  GpuBuffer<uint8_t> ws(std::max<size_t>(1, ops::sample_workspace_bytes(B, V)));
  out.poison();
  ops::sample(dz.get(), B, V, dr.get(), ops::SampleRule::fixed, out.get(), nullptr, ws.get(), nullptr);
  const auto got = out.host();
  for (int b = 0; b < B; ++b) {
    const SampleRow& r = rows[size_t(b)];
    double margin;
    const int want = ref_sample(&z[size_t(b) * V], V, r.temp, r.top_p, r.u, &margin, r.top_k, r.min_p);
    EXPECT_EQ(got[size_t(b)], want) << "row " << b << " V=" << V << " temperature=" << r.temp << " top_p=" << r.top_p
                                    << " u=" << r.u << " top_k=" << r.top_k << " min_p=" << r.min_p;
  }
  out.poison();
  ops::sample(dz.get(), B, V, dr.get(), ops::SampleRule::fixed, out.get(), nullptr, ws.get(), nullptr);
  EXPECT_EQ(out.host(), got) << "a second run drew other ids";
}

TEST_F(OpsLogits, SampleMatchesReferenceChoice) {
  for (auto [B, V] : {std::pair{1, 7}, {64, 32000}, {3, 151936}}) {
    std::vector<float> z;
    std::vector<SampleRow> rows;
    for (int b = 0; b < B; ++b) {
      const auto zr = spaced_logits(V, 4 + 20 * uniform(), 10 * normal());
      z.insert(z.end(), zr.begin(), zr.end());
      const float temps[] = {0.0f, 0.6f, 1.0f, 1.5f};
      const float tops[] = {1.0f, 0.95f, 0.5f, 0.05f};
      SampleRow r{temps[b % 4], tops[(b / 4 + b) % 4], 0};
      for (int tries = 0; tries < 20; ++tries) {  // redraw u (and top_p) away from boundaries
        r.u = float(uniform());
        double margin;
        ref_sample(zr.data(), V, r.temp, r.top_p, r.u, &margin);
        if (margin > 1e-5) break;
        r.top_p = std::min(1.0f, float(r.top_p * (0.9 + 0.1 * uniform())));
      }
      rows.push_back(r);
    }
    expect_samples(z, B, V, rows);
  }
}

TEST_F(OpsLogits, SampleNearlyFlatManyCandidates) {
  // Nearly flat over a large vocabulary: thousands of tokens per 1/16-octave bucket, so the
  // bucket's list does not fit in shared memory.
  const int V = 151936;
  std::vector<float> z;
  std::vector<SampleRow> rows;
  for (float top : {1.0f, 0.99f, 0.6f}) {
    const auto zr = spaced_logits(V, 1.5, normal());
    SampleRow r{1.0f, top, 0};
    for (int tries = 0; tries < 20; ++tries) {
      r.u = float(0.5 + 0.5 * uniform());
      double margin;
      ref_sample(zr.data(), V, r.temp, r.top_p, r.u, &margin);
      if (margin > 1e-6) break;
    }
    z.insert(z.end(), zr.begin(), zr.end());
    rows.push_back(r);
  }
  expect_samples(z, int(rows.size()), V, rows);
}

// Top-k, then top-p over what top-k kept, then min-p, in every combination, on peaked and broad
// rows; u (and the cuts) redrawn away from boundaries.
TEST_F(OpsLogits, SampleTopKMinPMatchReference) {
  const int V = 50000;
  const int ks[] = {0, 1, 7, 40, 1000, 30000};
  const float min_ps[] = {0.0f, 0.02f, 0.3f};
  const float tops[] = {1.0f, 0.9f, 0.5f};
  std::vector<float> z;
  std::vector<SampleRow> rows;
  for (int i = 0; i < 36; ++i) {
    const auto zr = spaced_logits(V, i % 2 ? 2.5 : 18.0, normal());  // broad, then peaked
    SampleRow r{i % 3 == 0 ? 1.0f : 0.7f, tops[i % 3], 0, ks[i % 6], min_ps[(i / 6) % 3]};
    for (int tries = 0; tries < 40; ++tries) {
      r.u = float(uniform());
      double margin;
      ref_sample(zr.data(), V, r.temp, r.top_p, r.u, &margin, r.top_k, r.min_p);
      if (margin > 1e-5) break;
      r.min_p = r.min_p > 0 ? float(r.min_p * (0.9 + 0.2 * uniform())) : 0.0f;
      r.top_p = r.top_p < 1 ? float(r.top_p * (0.95 + 0.05 * uniform())) : 1.0f;
    }
    z.insert(z.end(), zr.begin(), zr.end());
    rows.push_back(r);
  }
  expect_samples(z, int(rows.size()), V, rows);
}

// Top-k cutting inside a group of equal logits keeps its lowest ids; min-p keeps ties at the cut.
TEST_F(OpsLogits, SampleTopKTiesGoToLowerIds) {
  const int V = 12;
  std::vector<float> z(V, 1.0f);
  z[9] = 3.0f, z[4] = 2.0f, z[2] = 2.0f, z[7] = 2.0f;  // ranking 9, then 2, 4, 7, then the 1.0s by id
  std::vector<float> all;
  std::vector<SampleRow> rows;
  const SampleRow cases[] = {{1.0f, 1.0f, 0.99f, 2}, {1.0f, 1.0f, 0.7f, 3}, {1.0f, 1.0f, 0.999f, 6},
                             {1.0f, 0.99f, 0.95f, 5}, {1.0f, 1.0f, 0.9f, 0, 0.3f}, {0.5f, 1.0f, 0.9f, 1, 0.0f},
                             {1.0f, 1.0f, 0.999f, 0, 1.0f}};
  for (const SampleRow& r : cases) all.insert(all.end(), z.begin(), z.end()), rows.push_back(r);
  expect_samples(all, int(rows.size()), V, rows);
}

// NaN logits are never drawn (nor are -inf ones), u at or past 1 still gives a valid id, and a row
// of only NaN / -inf logits gives id 0.
TEST_F(OpsLogits, SampleSkipsNanLogits) {
  const int V = 3000;
  std::vector<float> z(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) z[size_t(i)] = i % 3 == 0 ? NAN : i % 3 == 1 ? -INFINITY : float(normal());
  std::vector<float> dead(static_cast<size_t>(V), -INFINITY);
  dead[5] = NAN;
  std::vector<float> all;
  std::vector<ops::SampleRow> rows;
  for (int r = 0; r < 8; ++r) {
    all.insert(all.end(), z.begin(), z.end());
    rows.push_back({1.0f, r % 2 ? 0.9f : 1.0f, r < 6 ? float(uniform()) : (r == 6 ? 1.0f : 2.0f), 0.0f, r % 4, 0.0f, 0.0});
  }
  all.insert(all.end(), dead.begin(), dead.end());
  rows.push_back({1.0f, 0.9f, 0.5f, 0.0f, 0, 0.0f, 0.0});
  const int B = int(rows.size());
  GpuBuffer<float> dz(all);
  GpuBuffer<ops::SampleRow> dr(rows);
  GpuBuffer<int32_t> out(static_cast<size_t>(B));
  GpuBuffer<uint8_t> ws(ops::sample_workspace_bytes(B, V));
  out.poison();
  ops::sample(dz.get(), B, V, dr.get(), ops::SampleRule::fixed, out.get(), nullptr, ws.get(), nullptr);
  const auto got = out.host();
  for (int b = 0; b + 1 < B; ++b) {
    ASSERT_TRUE(got[size_t(b)] >= 0 && got[size_t(b)] < V) << "row " << b;
    EXPECT_EQ(got[size_t(b)] % 3, 2) << "row " << b << " drew id " << got[size_t(b)];
  }
  EXPECT_EQ(got[size_t(B - 1)], 0);
}

// ReSET's rule inside the sampler: a row takes `temperature` when its entropy reaches the
// threshold, else t_low, and draws what the fixed rule draws at that temperature; the entropies
// are the bits logits_entropy_argmax gives.
TEST_F(OpsLogits, SampleEntropyRuleMatchesFixedTemperatures) {
  const int B = 6, V = 32000;
  std::vector<float> z;
  for (int b = 0; b < B; ++b) {
    const auto zr = spaced_logits(V, 4 + 20 * uniform(), 10 * normal());
    z.insert(z.end(), zr.begin(), zr.end());
  }
  GpuBuffer<float> dz(z), h(static_cast<size_t>(B)), h_rule(static_cast<size_t>(B));
  GpuBuffer<int32_t> arg(static_cast<size_t>(B)), out(static_cast<size_t>(B)), out_fixed(static_cast<size_t>(B));
  GpuBuffer<uint8_t> ws(std::max(ops::sample_workspace_bytes(B, V), ops::entropy_workspace_bytes(B, V)));
  ops::logits_entropy_argmax(dz.get(), B, V, h.get(), arg.get(), ws.get(), nullptr);
  const std::vector<float> entropy = h.host();
  std::vector<ops::SampleRow> rule(B), fixed(B);
  for (int b = 0; b < B; ++b) {
    const bool high = b % 2 == 0;  // odd rows below their threshold, even rows exactly at it
    const float u = float(uniform());
    rule[size_t(b)] = {1.2f, 0.9f, u, 0.3f, 0, 0.0f, double(entropy[size_t(b)]) + (high ? 0.0 : 0.25)};
    fixed[size_t(b)] = {high ? 1.2f : 0.3f, 0.9f, u, 0.0f, 0, 0.0f, 0.0};
  }
  GpuBuffer<ops::SampleRow> drule(rule), dfixed(fixed);
  h_rule.poison();
  ops::sample(dz.get(), B, V, drule.get(), ops::SampleRule::entropy, out.get(), h_rule.get(), ws.get(), nullptr);
  ops::sample(dz.get(), B, V, dfixed.get(), ops::SampleRule::fixed, out_fixed.get(), nullptr, ws.get(), nullptr);
  EXPECT_EQ(h_rule.host(), entropy);
  EXPECT_EQ(out.host(), out_fixed.host());
  for (int b = 0; b < B; ++b) {
    double margin;
    const int want = ref_sample(&z[size_t(b) * V], V, fixed[size_t(b)].temperature, 0.9, fixed[size_t(b)].u, &margin);
    if (margin > 1e-5) {
      EXPECT_EQ(out.host()[size_t(b)], want) << "row " << b;
    }
  }
}

TEST_F(OpsLogits, SampleTiesGoToLowerIds) {
  // Equal logits: ties ordered by id, both in the nucleus and in the draw.
  const int V = 10;
  std::vector<float> z(V, 1.0f);
  z[7] = 3.0f, z[3] = 3.0f, z[9] = -INFINITY;
  std::vector<float> all;
  std::vector<SampleRow> rows;
  const SampleRow cases[] = {{1.0f, 0.35f, 0.6f}, {1.0f, 1.0f, 0.99f}, {0.8f, 0.9f, 0.3f}, {0.0f, 1.0f, 0.5f},
                             {2.0f, 0.7f, 0.999f}, {1.0f, 0.2f, 0.7f}};
  for (const SampleRow& r : cases) all.insert(all.end(), z.begin(), z.end()), rows.push_back(r);
  expect_samples(all, int(rows.size()), V, rows);
  // All equal: top_p 0.35 keeps ids 0..3, u = 0.6 falls on the third of them.
  std::vector<float> flat(V, 0.5f);
  expect_samples(flat, 1, V, {{1.0f, 0.35f, 0.6f}});
}

TEST(OpsLogitsArgs, BadShapesThrow) {
  GpuBuffer<float> f(16);
  GpuBuffer<int32_t> i(16);
  EXPECT_THROW(ops::logits_entropy_argmax(f.get(), 1, 0, f.get(), i.get(), f.get(), nullptr), Error);
  EXPECT_THROW(ops::logits_entropy_argmax(f.get(), 1, 8, f.get(), i.get(), nullptr, nullptr), Error);  // no workspace
  EXPECT_THROW(ops::token_nll(f.get(), 1, 4, nullptr, f.get(), nullptr), Error);
  GpuBuffer<ops::SampleRow> r(1);
  EXPECT_THROW(ops::sample(f.get(), 1, 4, r.get(), ops::SampleRule::fixed, i.get(), nullptr, nullptr, nullptr),
               Error);  // no workspace
  EXPECT_THROW(ops::sample_workspace_bytes(1, 1 << 20), Error);  // beyond the exact sums' range
}

}  // namespace
}  // namespace nibble::cuda::test

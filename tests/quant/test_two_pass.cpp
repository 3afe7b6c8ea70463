// Two-pass W4A4 split (paper 000 App. D.3): B_main + B_comp must decode to the RaZeR weights and
// X B_main^T + X B_comp^T must equal X W^T.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "nibble/error.h"
#include "nibble/error_stats.h"
#include "nibble/format.h"
#include "nibble/two_pass.h"

namespace nibble {
namespace {

// Independent float64 decoders written from FORMATS.md.
const double kFp4[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
double ref_e3m3(int bits) {
  int e = bits >> 3, m = bits & 7;
  return e == 0 ? m / 32.0 : std::ldexp(1 + m / 8.0, e - 3);
}
double ref_e4m3(int bits) {
  int e = (bits >> 3) & 15, m = bits & 7;
  return e == 0 ? m / 512.0 : std::ldexp(1 + m / 8.0, e - 7);
}
int code_at(const PackedTensor& t, int64_t i) { return (t.qweight[size_t(i / 2)] >> (i % 2 * 4)) & 15; }

std::vector<double> ref_decode_razer(const PackedTensor& t) {
  std::vector<double> v(size_t(t.rows * t.cols));
  for (int64_t i = 0; i < t.rows * t.cols; ++i) {
    const int meta = t.scales[size_t(i / 16)], c = code_at(t, i);
    double e = c == 8 ? ((meta & 0x80) ? -1 : 1) * double((meta & 0x40) ? t.sv_b : t.sv_a)
                      : ((c & 8) ? -1 : 1) * kFp4[c & 7];
    v[size_t(i)] = e * ref_e3m3(meta & 0x3F) * double(t.global_scale);
  }
  return v;
}

std::vector<double> ref_decode_nvfp4(const PackedTensor& t) {
  std::vector<double> v(size_t(t.rows * t.cols));
  for (int64_t i = 0; i < t.rows * t.cols; ++i) {
    const int c = code_at(t, i);
    v[size_t(i)] = ((c & 8) ? -1 : 1) * kFp4[c & 7] * ref_e4m3(t.scales[size_t(i / 16)]) *
                   double(t.global_scale);
  }
  return v;
}

TEST(TwoPass, SplitOfEveryAllowedMagnitude) {
  std::set<double> fp4_sums;  // the paper's construction: |sv| = x1 + x2 on shared scales
  for (double x : kFp4)
    for (double y : kFp4) fp4_sums.insert(x + y);
  for (float v : special_value_grid()) {
    const SvSplit s = split_special_value(v);
    SCOPED_TRACE(v);
    ASSERT_TRUE(s.expressible);
    EXPECT_EQ(s.main_value + std::ldexp(s.comp_value, s.comp_scale_log2), v);
    EXPECT_TRUE(std::count(kFp4, kFp4 + 8, double(s.main_value)));
    EXPECT_TRUE(std::count(kFp4, kFp4 + 8, double(s.comp_value)));
    EXPECT_EQ(s.comp_scale_log2 == 0, fp4_sums.count(v) == 1);
    if (std::count(kFp4, kFp4 + 8, double(v))) {
      EXPECT_EQ(s.comp_value, 0.0f);
    }
  }
  EXPECT_FALSE(split_special_value(10.5f).expressible);  // no x1 + q 2^k (k <= 2) gives it
  EXPECT_FALSE(split_special_value(5.25f).expressible);
}

// Random shapes, data and pairs, fresh each run.
TEST(TwoPass, MainPlusCompDecodesToRazerAndGemmMatches) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<float> g = special_value_grid();
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t n = 1 + int64_t(rng() % 48), k = 16 * (1 + int64_t(rng() % 24));
    const float a = g[rng() % g.size()], b = g[rng() % g.size()];
    SCOPED_TRACE("trial " + std::to_string(trial) + " shape " + std::to_string(n) + "x" +
                 std::to_string(k) + " sv {" + std::to_string(a) + "," + std::to_string(b) + "}");
    std::vector<float> w = random_values({Distribution::Kind::StudentT, 5}, n * k, rng());
    if (trial == 0) std::fill(w.begin(), w.begin() + 16, 0.0f);  // an all-zero block
    QuantOptions opt;
    opt.sv_a = a;
    opt.sv_b = b;
    const PackedTensor razer = quantize("nvfp4-razer", w.data(), n, k, opt);
    const TwoPassWeights p = split_two_pass(razer);
    ASSERT_EQ(p.main.format, "nvfp4");
    ASSERT_EQ(p.comp.format, "nvfp4");

    // Exact in float64, through the independent decoders.
    const std::vector<double> want = ref_decode_razer(razer), m = ref_decode_nvfp4(p.main),
                              c = ref_decode_nvfp4(p.comp);
    int64_t sv_elements = 0, comp_nonzero = 0;
    for (int64_t i = 0; i < n * k; ++i) {
      ASSERT_EQ(m[size_t(i)] + c[size_t(i)], want[size_t(i)]) << "element " << i;
      sv_elements += code_at(razer, i) == 8;
      comp_nonzero += (code_at(p.comp, i) & 7) != 0;
      if (code_at(razer, i) != 8) {
        ASSERT_EQ(code_at(p.comp, i) & 7, 0) << "element " << i;
      }
    }
    EXPECT_DOUBLE_EQ(nonzero_fraction(p.comp), double(comp_nonzero) / double(n * k));
    EXPECT_LE(comp_nonzero, sv_elements);

    // The library's own decode of the three tensors agrees.
    const std::vector<float> lm = dequantize(p.main), lc = dequantize(p.comp), lw = dequantize(razer);
    for (int64_t i = 0; i < n * k; ++i)
      ASSERT_NEAR(double(lm[size_t(i)]) + lc[size_t(i)], lw[size_t(i)],
                  4e-7 * std::fabs(lw[size_t(i)]))
          << "element " << i;

    // GEMM: two float32 passes vs one float64 reference.
    const int64_t rows_x = 1 + int64_t(rng() % 8);
    std::vector<float> x = random_values({}, rows_x * k, rng());
    for (int64_t r = 0; r < rows_x; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        float y_main = 0, y_comp = 0;
        double ref = 0, bound = 0;
        for (int64_t q = 0; q < k; ++q) {
          const float xv = x[size_t(r * k + q)];
          y_main += xv * lm[size_t(j * k + q)];
          y_comp += xv * lc[size_t(j * k + q)];
          ref += double(xv) * want[size_t(j * k + q)];
          bound += std::fabs(double(xv) * want[size_t(j * k + q)]);
        }
        // float32 accumulation error of two length-k sums: below (k + 2) eps sum |x w|.
        ASSERT_NEAR(double(y_main) + double(y_comp), ref, double(k + 2) * 0x1p-23 * bound + 1e-30)
            << "Y[" << r << "," << j << "]";
      }
    }
    std::printf("[two-pass] %lldx%lld sv {%g,%g}: sv elements %.4f, B_comp nonzero %.4f\n",
                (long long)n, (long long)k, a, b, double(sv_elements) / double(n * k),
                nonzero_fraction(p.comp));
  }
}

TEST(TwoPass, RejectsWhatItCannotSplit) {
  std::vector<float> w = random_values({}, 4 * 32, fresh_seed());
  PackedTensor razer = quantize("nvfp4-razer", w.data(), 4, 32);
  PackedTensor wrong = razer;
  wrong.format = "nvfp4";
  EXPECT_THROW(split_two_pass(wrong), Error);
  PackedTensor truncated = razer;
  truncated.scales.pop_back();
  EXPECT_THROW(split_two_pass(truncated), Error);
  // A tensor whose special value cannot be split: one sv element, |sv| = 10.5.
  PackedTensor odd = razer;
  odd.sv_a = odd.sv_b = 10.5f;
  odd.qweight[0] = 0x08;
  EXPECT_THROW(split_two_pass(odd), Error);
  std::vector<float> w18 = random_values({}, 2 * 18, fresh_seed());
  EXPECT_THROW(split_two_pass(quantize("nvfp4-razer", w18.data(), 2, 18)), Error);
}

}  // namespace
}  // namespace nibble

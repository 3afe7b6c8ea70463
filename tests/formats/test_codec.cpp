// Exhaustive tests of the element codecs (codec.h), the fast scale / element encoders of
// src/formats against them, and the NF4 / INT4 element rules.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "formats/elements.h"
#include "formats/level_search.h"
#include "formats/scale_codes.h"
#include "nibble/codec.h"
#include "nibble/error.h"
#include "nibble/nf4.h"

namespace {

using nibble::ExMy;

// Value of every code from the type's written definition (float64), independent of codec.cpp.
struct Expected {
  const ExMy* type;
  double (*value)(uint32_t code);  // NaN for NaN codes, +-Inf for Inf codes
};

double sign_of(uint32_t code, int bit) { return (code >> bit) & 1 ? -1.0 : 1.0; }

double fp4(uint32_t c) {
  const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return sign_of(c, 3) * mag[c & 7];
}
double fp3(uint32_t c) {
  const double mag[4] = {0, 1, 2, 4};
  return sign_of(c, 2) * mag[c & 3];
}
double e4m3(uint32_t c) {
  uint32_t e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return NAN;
  double v = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, int(e) - 7);
  return sign_of(c, 7) * v;
}
double e5m2(uint32_t c) {
  uint32_t e = (c >> 2) & 31, m = c & 3;
  if (e == 31) return m ? NAN : sign_of(c, 7) * INFINITY;
  double v = e == 0 ? m / 4.0 * std::pow(2.0, -14) : (1 + m / 4.0) * std::pow(2.0, int(e) - 15);
  return sign_of(c, 7) * v;
}
double e8m0(uint32_t c) { return c == 255 ? NAN : std::pow(2.0, int(c) - 127); }
double e3m3(uint32_t c) {
  uint32_t e = c >> 3, m = c & 7;
  return e == 0 ? std::pow(2.0, -2) * m / 8.0 : std::pow(2.0, int(e) - 3) * (1 + m / 8.0);
}
double fp16(uint32_t c) {
  uint32_t e = (c >> 10) & 31, m = c & 1023;
  if (e == 31) return m ? NAN : sign_of(c, 15) * INFINITY;
  double v = e == 0 ? m / 1024.0 * std::pow(2.0, -14) : (1 + m / 1024.0) * std::pow(2.0, int(e) - 15);
  return sign_of(c, 15) * v;
}

const std::vector<Expected>& all_types() {
  static const std::vector<Expected> v = {
      {&nibble::kFP4E2M1, fp4}, {&nibble::kFP3E2M0, fp3}, {&nibble::kFP8E4M3, e4m3},
      {&nibble::kFP8E5M2, e5m2}, {&nibble::kE8M0, e8m0},   {&nibble::kE3M3, e3m3},
      {&nibble::kFP16, fp16}};
  return v;
}

// Non-negative finite codes in increasing value order (codes below the sign bit, non-special).
std::vector<uint32_t> positive_codes(const Expected& t) {
  std::vector<uint32_t> out;
  uint32_t n = uint32_t(t.type->code_count()) >> (t.type->is_signed ? 1 : 0);
  for (uint32_t c = 0; c < n; ++c) {
    if (std::isfinite(t.value(c))) out.push_back(c);
  }
  return out;
}

}  // namespace

TEST(Codec, CodeCountsAndMaxima) {
  EXPECT_EQ(nibble::kFP4E2M1.code_count(), 16);
  EXPECT_EQ(nibble::kFP3E2M0.code_count(), 8);
  EXPECT_EQ(nibble::kFP8E4M3.code_count(), 256);
  EXPECT_EQ(nibble::kE8M0.code_count(), 256);
  EXPECT_EQ(nibble::kE3M3.code_count(), 64);
  EXPECT_EQ(nibble::kFP4E2M1.max_finite(), 6.0);
  EXPECT_EQ(nibble::kFP3E2M0.max_finite(), 4.0);
  EXPECT_EQ(nibble::kFP8E4M3.max_finite(), 448.0);
  EXPECT_EQ(nibble::kFP8E5M2.max_finite(), 57344.0);
  EXPECT_EQ(nibble::kE8M0.max_finite(), std::ldexp(1.0, 127));
  EXPECT_EQ(nibble::kE3M3.max_finite(), 30.0);
  EXPECT_EQ(nibble::kE3M3.decode(1), std::ldexp(1.0, -5));
  EXPECT_EQ(nibble::kFP16.max_finite(), 65504.0);
}

TEST(Codec, DecodesEveryCode) {
  for (const Expected& t : all_types()) {
    for (uint32_t c = 0; c < uint32_t(t.type->code_count()); ++c) {
      double want = t.value(c), got = t.type->decode(c);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got) && t.type->is_nan(c)) << t.type->name << " code " << c;
      } else {
        EXPECT_EQ(got, want) << t.type->name << " code " << c;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << t.type->name << " code " << c;
        EXPECT_FALSE(t.type->is_nan(c)) << t.type->name << " code " << c;
      }
    }
  }
}

TEST(Codec, EncodeInvertsDecode) {
  for (const Expected& t : all_types()) {
    for (uint32_t c = 0; c < uint32_t(t.type->code_count()); ++c) {
      double v = t.value(c);
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(t.type->encode(v), c) << t.type->name << " code " << c;  // -0 keeps its sign code
    }
  }
}

TEST(Codec, MidpointsRoundToTheEvenCode) {
  for (const Expected& t : all_types()) {
    std::vector<uint32_t> codes = positive_codes(t);
    uint32_t sign = t.type->is_signed ? 1u << (t.type->ebits + t.type->mbits) : 0u;
    for (size_t i = 0; i + 1 < codes.size(); ++i) {
      uint32_t lo = codes[i], hi = codes[i + 1];
      ASSERT_EQ(hi, lo + 1) << t.type->name;
      double a = t.value(lo), b = t.value(hi), mid = (a + b) / 2;
      uint32_t even = lo % 2 == 0 ? lo : hi;
      EXPECT_EQ(t.type->encode(mid), even) << t.type->name << " between " << a << " and " << b;
      EXPECT_EQ(t.type->encode(std::nextafter(mid, 0.0)), lo) << t.type->name << " below " << mid;
      EXPECT_EQ(t.type->encode(std::nextafter(mid, INFINITY)), hi) << t.type->name << " above " << mid;
      if (sign) {
        EXPECT_EQ(t.type->encode(-mid), even | sign) << t.type->name << " at " << -mid;
      }
    }
  }
}

TEST(Codec, SaturatesBeyondTheLargestFiniteValue) {
  for (const Expected& t : all_types()) {
    uint32_t top = t.type->max_finite_code();
    double m = t.type->max_finite();
    EXPECT_EQ(t.value(top), m) << t.type->name;
    for (double x : {m * 1.0000001, m * 1.5, m * 4, 1e300}) {
      EXPECT_EQ(t.type->encode(x), top) << t.type->name << " " << x;
      if (t.type->is_signed) {
        uint32_t sign = 1u << (t.type->ebits + t.type->mbits);
        EXPECT_EQ(t.type->encode(-x), top | sign) << t.type->name << " " << -x;
      }
    }
  }
}

TEST(Codec, RejectsNaNInfAndNegativeUnsigned) {
  for (const Expected& t : all_types()) {
    EXPECT_THROW(t.type->encode(NAN), nibble::Error) << t.type->name;
    EXPECT_THROW(t.type->encode(INFINITY), nibble::Error) << t.type->name;
    EXPECT_THROW(t.type->encode(-INFINITY), nibble::Error) << t.type->name;
  }
  EXPECT_THROW(nibble::kE3M3.encode(-1.0), nibble::Error);
  EXPECT_THROW(nibble::kE8M0.encode(-1.0), nibble::Error);
  EXPECT_EQ(nibble::kE3M3.encode(-0.0), 0u);
  EXPECT_EQ(nibble::kE8M0.encode(0.0), 0u);            // no zero: the smallest value
  EXPECT_EQ(nibble::kE3M3.encode(1e-9), 0u);           // below half the smallest subnormal
  EXPECT_EQ(nibble::kE3M3.encode(std::ldexp(1.0, -6)), 0u);  // half of 2^-5: tie to even 0
}

TEST(Codec, RandomValuesGoToTheNearestCode) {
  unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const Expected& t : all_types()) {
    std::vector<uint32_t> codes = positive_codes(t);
    double top = t.type->max_finite(), bottom = t.value(codes[1]);
    std::uniform_real_distribution<double> lg(std::log2(bottom) - 2, std::log2(top) + 1);
    for (int i = 0; i < 2000; ++i) {
      double x = std::exp2(lg(rng));
      uint32_t c = t.type->encode(x);
      double err = std::fabs(t.value(c) - x);
      // values grow with the code, so the neighbours are the only rivals
      for (uint32_t other : {c - 1, c + 1}) {
        if (c == 0 || other > codes.back()) continue;
        ASSERT_LE(err, std::fabs(t.value(other) - x)) << t.type->name << " " << x;
      }
    }
  }
}

// The fast encoders used by the block formats agree with the codec everywhere that matters.
TEST(FastEncoders, AgreeWithTheCodec) {
  unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto check = [&](const ExMy& type, uint32_t (*fast)(double)) {
    std::vector<double> probes = {0.0, 1e-300, 1e300};
    for (uint32_t c = 0; c + 1 < uint32_t(type.code_count()); ++c) {
      double a = type.decode(c), b = type.decode(c + 1);
      if (!(std::isfinite(a) && std::isfinite(b) && a >= 0 && b > a)) continue;
      double mid = (a + b) / 2;
      for (double p : {a, mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e308), b * 1.7}) probes.push_back(p);
    }
    std::uniform_real_distribution<double> lg(-40, 20);
    for (int i = 0; i < 20000; ++i) probes.push_back(std::exp2(lg(rng)));
    for (double p : probes) ASSERT_EQ(fast(p), type.encode(p)) << type.name << " " << p;
  };
  check(nibble::kFP8E4M3, nibble::formats::e4m3_code);
  check(nibble::kE3M3, nibble::formats::e3m3_code);
  check(nibble::kFP16, nibble::formats::minifloat_code<10, 15, 0x7BFF>);
  // FP4 element rounding (ties to even, sign kept) against the codec.
  for (int i = -4000; i <= 4000; ++i) {
    double r = i / 512.0;
    ASSERT_EQ(nibble::formats::fp4_code_even(r), nibble::kFP4E2M1.encode(r)) << r;
  }
}

TEST(FastEncoders, DecodeTablesMatchTheCodec) {
  for (uint32_t c = 0; c < 256; ++c) {
    double want = nibble::kFP8E4M3.decode(c);
    float got = nibble::formats::e4m3_table()[c];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_EQ(double(got), want) << c;
    }
  }
  for (uint32_t c = 0; c < 64; ++c) EXPECT_EQ(double(nibble::formats::e3m3_table()[c]), e3m3(c)) << c;
}

// RaZeR element rule: ties go to the smaller magnitude, never to -0.
TEST(Elements, RaZeRTiesGoToTheSmallerMagnitude) {
  using nibble::formats::fp4_code_small;
  using nibble::formats::fp3_code_small;
  EXPECT_EQ(fp4_code_small(0.25), 0u);
  EXPECT_EQ(fp4_code_small(-0.25), 0u);
  EXPECT_EQ(fp4_code_small(-0.1), 0u);
  EXPECT_EQ(fp4_code_small(0.75), 1u);   // 0.5, not 1
  EXPECT_EQ(fp4_code_small(3.5), 5u);    // 3, not 4
  EXPECT_EQ(fp4_code_small(-5.0), 14u);  // -4
  EXPECT_EQ(fp4_code_small(100.0), 7u);
  EXPECT_EQ(fp3_code_small(1.5), 1u);
  EXPECT_EQ(fp3_code_small(-3.0), 6u);
  EXPECT_EQ(fp3_code_small(-0.5), 0u);
  using nibble::formats::FP4Grid;
  using nibble::formats::razer_code;
  EXPECT_EQ(razer_code<FP4Grid>(5.0, 5.0), 8u);
  EXPECT_EQ(razer_code<FP4Grid>(5.5, 5.0), 8u);   // tie 5 vs 6: smaller magnitude (sv)
  EXPECT_EQ(razer_code<FP4Grid>(4.5, 5.0), 6u);   // tie 4 vs 5: 4
  EXPECT_EQ(razer_code<FP4Grid>(-7.0, -8.0), 15u);  // tie -6 vs -8: -6
}

TEST(NF4, EncodesLevelsAndTiesToTheLowerCode) {
  for (uint32_t c = 0; c < 16; ++c) EXPECT_EQ(nibble::nf4_encode(nibble::kNF4Levels[c]), c);
  for (uint32_t c = 0; c + 1 < 16; ++c) {
    double mid = (double(nibble::kNF4Levels[c]) + double(nibble::kNF4Levels[c + 1])) / 2;
    EXPECT_EQ(nibble::nf4_encode(mid), c) << mid;
    EXPECT_EQ(nibble::nf4_encode(std::nextafter(mid, 2.0)), c + 1) << mid;
  }
  // By hand: 0.5 lies between 0.4407 (12) and 0.5626 (13), midpoint 0.5017: code 12.
  EXPECT_EQ(nibble::nf4_encode(0.5), 12u);
  EXPECT_EQ(nibble::nf4_encode(-0.2), 5u);   // -0.1848 is nearer than -0.2844
  EXPECT_EQ(nibble::nf4_encode(0.08), 8u);
  EXPECT_EQ(nibble::nf4_encode(3.0), 15u);
  EXPECT_EQ(nibble::nf4_encode(-3.0), 0u);
  EXPECT_THROW(nibble::nf4_encode(NAN), nibble::Error);
}

TEST(INT4, EncodesByHand) {
  EXPECT_EQ(nibble::int4_encode(0.0, 0.5, 5), 5u);
  EXPECT_EQ(nibble::int4_encode(0.25, 0.5, 5), 5u);   // 0.5 ties to even 0
  EXPECT_EQ(nibble::int4_encode(0.75, 0.5, 5), 7u);   // 1.5 ties to even 2
  EXPECT_EQ(nibble::int4_encode(-10.0, 0.5, 5), 0u);  // clamps
  EXPECT_EQ(nibble::int4_encode(10.0, 0.5, 5), 15u);
  EXPECT_EQ(nibble::int4_decode(7, 5, 0.5), 1.0);
}

// The AVX2 block assignment of the RaZeR family against the scalar element rule, on random and
// tie-heavy inputs, with and without a special value.
TEST(Elements, VectorAssignmentMatchesTheScalarRule) {
  using namespace nibble::formats;
  unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> grid(-40, 40), svi(5, 19), len(1, 67);
  std::normal_distribution<float> gauss(0, 3);
  std::vector<float> x(67);
  std::vector<uint8_t> codes(67);
  std::vector<double> vals(67);
  for (int trial = 0; trial < 3000; ++trial) {
    int n = len(rng);
    for (int i = 0; i < n; ++i) x[size_t(i)] = trial % 2 ? gauss(rng) : float(grid(rng)) / 4;
    double sv = (trial % 3 ? 1 : -1) * svi(rng) * 0.5, step = trial % 4 ? 1.0 : 0.75;
    assign_levels<FP4Grid, true>(x.data(), n, 1.0, step, sv, codes.data(), vals.data());
    for (int i = 0; i < n; ++i) {
      uint32_t want = razer_code<FP4Grid>(double(x[size_t(i)]) / step, sv);
      ASSERT_EQ(codes[size_t(i)], want) << x[size_t(i)] << " sv " << sv;
      ASSERT_EQ(vals[size_t(i)], razer_value<FP4Grid>(want, sv));
    }
    assign_levels<FP3Grid, true>(x.data(), n, 2.0, step, sv, codes.data(), vals.data());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(codes[size_t(i)], razer_code<FP3Grid>(double(x[size_t(i)]) * 2.0 / step, sv)) << x[size_t(i)];
    }
    assign_levels<FP4Grid, false>(x.data(), n, 1.0, step, sv, codes.data(), vals.data());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(codes[size_t(i)], fp4_code_small(double(x[size_t(i)]) / step)) << x[size_t(i)];
    }
  }
}

TEST(Elements, Sum4UsesTheDocumentedOrder) {
  double t[7] = {1e16, 1, -1e16, 1, 3, 0.5, 0.25};
  // lanes: {1e16 + 3, 1 + 0.5, -1e16 + 0.25, 1} -> (1e16 + 1.5) + (-1e16 + 1)
  double lane0 = 1e16 + 3, lane1 = 1.0 + 0.5, lane2 = -1e16 + 0.25, lane3 = 1.0;
  EXPECT_EQ(nibble::formats::sum4(t, 7), (lane0 + lane1) + (lane2 + lane3));
}

// half/bf16 conversions against exhaustive round trips and a float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nibble/half.h"

namespace {

double half_value_ref(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

}  // namespace

TEST(Half, DecodesEveryFiniteCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    uint16_t h = uint16_t(c);
    if (((h >> 10) & 31) == 31) continue;
    EXPECT_EQ(double(nibble::half_to_float(h)), half_value_ref(h)) << c;
    EXPECT_EQ(nibble::float_to_half(nibble::half_to_float(h)), h) << c;
  }
}

TEST(Half, RoundsToNearestEven) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> exp(-26, 16);
  for (int i = 0; i < 200000; ++i) {
    float x = std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng), int(exp(rng)));
    if (i & 1) x = -x;
    uint16_t h = nibble::float_to_half(x);
    double got = half_value_ref(h);
    if (std::fabs(x) >= 65520.0) {
      EXPECT_TRUE(std::isinf(nibble::half_to_float(h)));
      continue;
    }
    // no other half is closer; on a tie the even code wins
    for (int d : {-1, 1}) {
      uint16_t n = uint16_t(h + d);
      if (((n >> 10) & 31) == 31 || ((n ^ h) & 0x8000)) continue;
      double other = half_value_ref(n);
      double eg = std::fabs(got - x), eo = std::fabs(other - x);
      EXPECT_TRUE(eg < eo || (eg == eo && (h & 1) == 0)) << x;
    }
  }
}

TEST(Bf16, RoundTripAndRounding) {
  for (uint32_t c = 0; c < 65536; ++c) {
    uint16_t b = uint16_t(c);
    if (((b >> 7) & 0xFF) == 0xFF) continue;
    EXPECT_EQ(nibble::float_to_bf16(nibble::bf16_to_float(b)), b);
  }
  EXPECT_EQ(nibble::float_to_bf16(1.0f + 0x1p-8f), nibble::float_to_bf16(1.0f));  // tie -> even
  EXPECT_EQ(nibble::float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
}

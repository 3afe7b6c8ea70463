#pragma once
// Element-level rounding of the 4- and 3-bit formats, as exact comparisons of the (float64)
// scaled value r = x / step against the midpoints between neighbouring levels. Internal.
// The RaZeR-rule functions here are the scalar statement of the rule; level_search.h holds the
// AVX2 form the quantizers run, and the tests check one against the other.
#include <cmath>
#include <cstdint>

namespace nibble::formats {

inline constexpr float kFP4Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
inline constexpr float kFP3Values[8] = {0.0f, 1.0f, 2.0f, 4.0f, -0.0f, -1.0f, -2.0f, -4.0f};

// OCP FP4 E2M1: nearest, ties to the even code, saturating at 6; the sign comes from r's sign
// bit (so a negative value that rounds to zero is code 0b1000, -0).
inline uint32_t fp4_code_even(double r) {
  double a = std::fabs(r);
  uint32_t i = (a > 0.25) + (a >= 0.75) + (a > 1.25) + (a >= 1.75) + (a > 2.5) + (a >= 3.5) + (a > 5.0);
  return i | (std::signbit(r) ? 8u : 0u);
}

// RaZeR rule (FP4 and FP3 grids): nearest level, ties to the smaller magnitude, saturating;
// zero is always code 0 (the -0 code is the special value, never produced here).
inline uint32_t fp4_code_small(double r) {
  double a = std::fabs(r);
  uint32_t i = (a > 0.25) + (a > 0.75) + (a > 1.25) + (a > 1.75) + (a > 2.5) + (a > 3.5) + (a > 5.0);
  return i == 0 ? 0u : (i | (r < 0 ? 8u : 0u));
}
inline uint32_t fp3_code_small(double r) {
  double a = std::fabs(r);
  uint32_t i = (a > 0.5) + (a > 1.5) + (a > 3.0);
  return i == 0 ? 0u : (i | (r < 0 ? 4u : 0u));
}

// Whether the special value sv (code sv_code) replaces the regular level v (code v_code) as the
// nearest to r: strictly closer, or equally close with a smaller magnitude, or the same value
// with the lower code.
inline bool prefer_special(double r, double v, uint32_t v_code, double sv, uint32_t sv_code) {
  if (sv == v) return sv_code < v_code;
  double mid = (v + sv) * 0.5;  // exact: both have a few significant bits
  if (r == mid) return std::fabs(sv) < std::fabs(v);
  return sv > v ? r > mid : r < mid;
}

// Grids for the RaZeR family: regular levels, the special-value code and the regular rounding.
struct FP4Grid {
  static constexpr int kBits = 4;
  static constexpr uint32_t kSpecialCode = 8;
  static constexpr double kMax = 6.0;
  static double value(uint32_t c) { return kFP4Values[c]; }
  static uint32_t regular(double r) { return fp4_code_small(r); }
};
struct FP3Grid {
  static constexpr int kBits = 3;
  static constexpr uint32_t kSpecialCode = 4;
  static constexpr double kMax = 4.0;
  static double value(uint32_t c) { return kFP3Values[c]; }
  static uint32_t regular(double r) { return fp3_code_small(r); }
};

// Nearest code of r over the grid's regular levels plus sv (RaZeR element rule).
template <class Grid>
inline uint32_t razer_code(double r, double sv) {
  uint32_t c = Grid::regular(r);
  return prefer_special(r, Grid::value(c), c, sv, Grid::kSpecialCode) ? Grid::kSpecialCode : c;
}

// Value of a RaZeR code: the special code decodes to sv.
template <class Grid>
inline double razer_value(uint32_t c, double sv) {
  return c == Grid::kSpecialCode ? sv : Grid::value(c);
}

}  // namespace nibble::formats

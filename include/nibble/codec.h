#pragma once
// Element codecs: one data-driven minifloat (ExMy) description covers every floating element and
// scale type of ../shared/FORMATS.md, so a new type is one line. Plus INT4 helpers.
// encode() rounds to nearest with ties to the even code, saturates to the largest finite value,
// and throws nibble::Error on NaN / Inf input (and on negative input to an unsigned type).
#include <cstdint>

namespace nibble {

enum class Specials : uint8_t {
  None,  // every code is finite (FP4, FP3, E3M3): exponent all-ones is an ordinary binade
  IEEE,  // exponent all-ones: mantissa 0 = Inf, else NaN (E5M2, FP16)
  FN,    // no Inf; only exponent and mantissa all-ones is NaN (E4M3 "fn")
  E8M0,  // no zero, no subnormals, no sign: 2^(e - bias); e all-ones is NaN
};

struct ExMy {
  int ebits = 0, mbits = 0;
  bool is_signed = true;
  int bias = 0;
  Specials specials = Specials::None;
  const char* name = "";

  int code_count() const { return 1 << (ebits + mbits + (is_signed ? 1 : 0)); }
  bool is_nan(uint32_t code) const;
  double decode(uint32_t code) const;  // NaN / Inf codes decode to NaN / Inf
  // Throws nibble::Error (naming this type) on NaN / Inf input.
  uint32_t encode(double x) const;
  double max_finite() const { return decode(max_finite_code()); }
  uint32_t max_finite_code() const;  // largest positive finite code
};

inline constexpr ExMy kFP4E2M1{2, 1, true, 1, Specials::None, "FP4 E2M1"};
inline constexpr ExMy kFP3E2M0{2, 0, true, 1, Specials::None, "FP3 E2M0"};
inline constexpr ExMy kFP8E4M3{4, 3, true, 7, Specials::FN, "FP8 E4M3"};
inline constexpr ExMy kFP8E5M2{5, 2, true, 15, Specials::IEEE, "FP8 E5M2"};
inline constexpr ExMy kE8M0{8, 0, false, 127, Specials::E8M0, "E8M0"};
inline constexpr ExMy kE3M3{3, 3, false, 3, Specials::None, "E3M3"};
inline constexpr ExMy kFP16{5, 10, true, 15, Specials::IEEE, "FP16"};

// INT4 asymmetric (GPTQ / AWQ style): x^ = (q - z) * s with q, z in 0..15.
inline double int4_decode(uint32_t q, uint32_t z, double s) { return (double(q) - double(z)) * s; }
// q = clamp(round_half_even(x / s) + z, 0, 15); s must be > 0.
uint32_t int4_encode(double x, double s, uint32_t z);

}  // namespace nibble

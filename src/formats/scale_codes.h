#pragma once
// Fast encoders / decode tables of the scale and 8-bit element types (E4M3, E3M3, E8M0), for
// the hot loops. They agree with the generic codec of nibble/codec.h (the tests check it).
#include <bit>
#include <cmath>
#include <cstdint>

#include "nibble/codec.h"

namespace nibble::formats {

// Nearest code of a >= 0 (finite) in a minifloat with subnormals, ties to the even code,
// saturating at kMaxCode: integer rounding on the float64 mantissa.
template <int kMbits, int kBias, uint32_t kMaxCode>
inline uint32_t minifloat_code(double a) {
  constexpr int emin = 1 - kBias;  // exponent of the smallest normal binade
  uint64_t bits = std::bit_cast<uint64_t>(a);
  int e = int(bits >> 52) - 1023;
  uint32_t code;
  if (e < emin) {  // subnormal (or zero): the code is a / 2^(emin - kMbits), rounded
    code = uint32_t(std::nearbyint(a * std::ldexp(1.0, kMbits - emin)));
  } else {
    uint64_t mant = bits & ((uint64_t(1) << 52) - 1);
    constexpr int drop = 52 - kMbits;
    code = (uint32_t(e - emin + 1) << kMbits) | uint32_t(mant >> drop);
    uint64_t rem = mant & ((uint64_t(1) << drop) - 1), half = uint64_t(1) << (drop - 1);
    code += (rem > half || (rem == half && (code & 1))) ? 1 : 0;
  }
  return code > kMaxCode ? kMaxCode : code;
}

inline uint32_t e4m3_code(double a) { return minifloat_code<3, 7, 0x7E>(a); }  // a >= 0
inline uint32_t e3m3_code(double a) { return minifloat_code<3, 3, 0x3F>(a); }  // a >= 0
inline uint32_t e4m3_signed_code(double r) {
  return e4m3_code(std::fabs(r)) | (std::signbit(r) ? 0x80u : 0u);
}

// Decode tables (float), built once from the generic codec.
template <const ExMy& kType>
const float* decode_table() {
  static const auto table = [] {
    struct T {
      float v[256];
    } t{};
    for (int c = 0; c < kType.code_count() && c < 256; ++c) t.v[c] = float(kType.decode(uint32_t(c)));
    return t;
  }();
  return table.v;
}
inline const float* e4m3_table() { return decode_table<kFP8E4M3>(); }
inline const float* e3m3_table() { return decode_table<kE3M3>(); }

}  // namespace nibble::formats

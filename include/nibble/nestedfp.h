#pragma once
// NestedFP (paper 004): an FP16 weight split losslessly into an E4M3 upper byte U (U read as E4M3
// equals w * 2^8, rounded) and a lower byte L; see ../shared/FORMATS.md "NestedFP".
#include <cstdint>

namespace nibble::nestedfp {

struct Planes {
  uint8_t upper, lower;
};

// |w| < 1.875 and finite: E[4] = 0 and not (E = 15 and M[9:7] = 7).
constexpr bool eligible(uint16_t w) {
  uint32_t e = (w >> 10) & 0x1F, m = w & 0x3FF;
  return (e & 0x10) == 0 && !(e == 15 && (m >> 7) == 7);
}

// Precondition: eligible(w).
constexpr Planes split(uint16_t w) {
  uint32_t sign = w >> 15, e = (w >> 10) & 0xF, m = w & 0x3FF;
  uint32_t t = (e << 3) | (m >> 7);  // E[3:0] M[9:7]
  uint32_t rest = m & 0x7F;          // M[6:0]: round to nearest even into t
  bool up = rest > 0x40 || (rest == 0x40 && (t & 1));
  if (t == 0x7E) up = false;         // E = 15, M[9:7] = 6: rounding up would make E4M3 NaN
  return {uint8_t((sign << 7) | (t + (up ? 1 : 0))), uint8_t(m & 0xFF)};
}

constexpr uint16_t reconstruct(uint8_t upper, uint8_t lower) {
  uint32_t hi6 = ((uint32_t(upper) - (uint32_t(lower) >> 7)) >> 1) & 0x3F;
  return uint16_t((((uint32_t(upper) & 0x80) | hi6) << 8) | lower);
}

}  // namespace nibble::nestedfp

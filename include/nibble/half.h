#pragma once
// IEEE binary16 and bfloat16 <-> float conversions (round-to-nearest-even), header-only so the
// loaders, formats and kernels share one definition.
#include <bit>
#include <cstdint>
#include <cstring>

namespace nibble {

inline float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: value = man * 2^-24
      float f = float(man) * 0x1p-24f;
      bits = std::bit_cast<uint32_t>(f) | sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) return uint16_t(sign | 0x7C00 | (ax > 0x7F800000u ? 0x200 : 0));  // Inf/NaN
  if (ax >= 0x477FF000u) return uint16_t(sign | 0x7C00);  // rounds past 65504 -> Inf
  if (ax < 0x38800000u) {  // result is subnormal (or zero) in half: round x / 2^-24 to an integer
    float a = std::bit_cast<float>(ax);
    float scaled = a * 0x1p24f;  // exact, < 1024
    // round half to even via the float unit (default rounding mode is RNE)
    float r = __builtin_nearbyintf(scaled);
    return uint16_t(sign | uint16_t(r));
  }
  uint32_t mant = ax & 0x7FFFFF;
  uint32_t exp = (ax >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // carry may roll into the exponent: correct
  return uint16_t(sign | h);
}

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7FFF + ((x >> 16) & 1);
  return uint16_t((x + rounding) >> 16);
}

}  // namespace nibble

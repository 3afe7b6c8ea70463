// The RaZeR decoder model, written as the bit operations the hardware performs.
#include <cmath>

#include <fmt/format.h>

#include "nibble/error.h"
#include "nibble/razer_decoder.h"

namespace nibble::razer_hw {

FixedHalf decode_fp4(uint8_t code) {
  const bool sign = (code >> 3) & 1;
  const uint8_t exp = (code >> 1) & 0b11, man = code & 1;
  // E=0: subnormal, value m/2 = m half units. E>0: 2^(E-1) * (1 + m/2) = (2 + m) << (E-1) halves.
  const uint8_t halves = exp == 0 ? man : uint8_t(uint8_t(0b10 | man) << (exp - 1));
  return {sign, halves};
}

uint8_t encode_offset(float magnitude, const std::string& what) {
  const float twice = magnitude * 2.0f;
  if (!(magnitude >= 2.5f && magnitude <= 9.5f) || twice != std::nearbyint(twice))
    throw Error(fmt::format("{} {}: must be a multiple of 0.5 in [2.5, 9.5] (6.0 plus a 4-bit "
                            "S.II.F offset register)",
                            what, magnitude));
  const int offset = int(twice) - 12;  // in half units, -7..7
  const uint8_t sign = offset < 0 ? 1 : 0;
  return uint8_t(sign << 3 | uint8_t(std::abs(offset)));
}

int offset_half_units(uint8_t reg) {
  const int mag = reg & 0b111;  // II.F: integer bits and fraction bit, read as half units
  return (reg & 0b1000) ? -mag : mag;
}

std::string register_bits(uint8_t reg) {
  std::string s(4, '0');
  for (int i = 0; i < 4; ++i) s[size_t(i)] = ((reg >> (3 - i)) & 1) ? '1' : '0';
  return s;
}

uint8_t special_magnitude_half_units(uint8_t reg) {
  // 6.0 = 12 half units; the adder is sign-magnitude: subtract when the offset is negative.
  constexpr uint8_t six = 12;
  const uint8_t mag = reg & 0b111;
  return (reg & 0b1000) ? uint8_t(six - mag) : uint8_t(six + mag);
}

WeightDecoder WeightDecoder::for_pair(float sv_a, float sv_b) {
  return WeightDecoder(encode_offset(sv_a, "special value a"), encode_offset(sv_b, "special value b"));
}

FixedHalf WeightDecoder::decode(uint8_t code, bool select, bool sign) const {
  code &= 0xF;
  if (code != kRedundantZeroCode) return decode_fp4(code);
  return {sign, special_magnitude_half_units(select ? of1_ : of0_)};
}

ActivationDecoder ActivationDecoder::for_magnitude(float sv) {
  return ActivationDecoder(encode_offset(sv, "activation special value"));
}

FixedHalf ActivationDecoder::decode(uint8_t code, bool sign) const {
  code &= 0xF;
  if (code != kRedundantZeroCode) return decode_fp4(code);
  return {sign, special_magnitude_half_units(of_)};
}

}  // namespace nibble::razer_hw

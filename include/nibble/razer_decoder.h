#pragma once
// Bit-accurate model of the RaZeR tensor-core element decoders (paper 000, Sec. 4.4, Fig. 4).
//
// The weight decoder holds two 4-bit offset registers OF_0 / OF_1, each a sign-magnitude fixed
// point number S.II.F (1 sign, 2 integer, 1 fraction bit: -3.5 .. +3.5 in steps of 0.5). A block's
// metadata gives a 1-bit select (which register) and a 1-bit sign. The special-value magnitude is
// 6.0 + OF[select]; the sign bit is concatenated in front. The FP4 code is compared against the
// redundant-zero code and, on a match, the special value replaces the FP4 value.
// The activation decoder is the same with one register and no select bit.
//
// nibble's contract (FORMATS.md) makes code 0b1000 (-0) the redundant zero, so that is the
// compare constant here (the paper's text says "binary zero"; the bit pattern is a convention).
// Decoder outputs are signed fixed point in units of 0.5 (every FP4 value and every special value
// is a multiple of 0.5; the largest magnitude, 9.5, needs 5 magnitude bits).
#include <cstdint>
#include <string>

namespace nibble::razer_hw {

inline constexpr uint8_t kRedundantZeroCode = 0b1000;

// Decoder output: sign + magnitude in half units (0..19).
struct FixedHalf {
  bool negative = false;
  uint8_t half_units = 0;
  double value() const { return (negative ? -0.5 : 0.5) * half_units; }
};

// Plain FP4 E2M1 code -> fixed point (the datapath of a standard NVFP4 decoder).
FixedHalf decode_fp4(uint8_t code);

// Offset registers. encode_offset takes the special-value MAGNITUDE the register must produce
// (6.0 + offset) and throws nibble::Error naming `what` unless it is a multiple of 0.5 in
// [2.5, 9.5]. offset_half_units reads a register back as a signed offset in half units.
uint8_t encode_offset(float magnitude, const std::string& what = "special value");
int offset_half_units(uint8_t reg);
std::string register_bits(uint8_t reg);  // "1010"

// Special-value magnitude produced by a register: the 5-bit adder 6.0 + offset.
uint8_t special_magnitude_half_units(uint8_t reg);

class WeightDecoder {
 public:
  WeightDecoder(uint8_t of0, uint8_t of1) : of0_(of0 & 0xF), of1_(of1 & 0xF) {}
  static WeightDecoder for_pair(float sv_a, float sv_b);  // OF_0 <- a, OF_1 <- b
  // code: 4-bit FP4 element; select / sign: the block's metadata bits (scale byte bits 6 and 7).
  FixedHalf decode(uint8_t code, bool select, bool sign) const;
  uint8_t of0() const { return of0_; }
  uint8_t of1() const { return of1_; }

 private:
  uint8_t of0_, of1_;
};

class ActivationDecoder {
 public:
  explicit ActivationDecoder(uint8_t of) : of_(of & 0xF) {}
  static ActivationDecoder for_magnitude(float sv);
  // sign: the block's metadata bit (scale byte bit 7).
  FixedHalf decode(uint8_t code, bool sign) const;
  uint8_t of() const { return of_; }

 private:
  uint8_t of_;
};

}  // namespace nibble::razer_hw

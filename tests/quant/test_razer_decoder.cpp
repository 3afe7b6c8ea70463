// The RaZeR decoder model (paper 000 Sec. 4.4) against the format library's dequantization:
// every element code x every metadata combination x every register pair x every block scale.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nibble/error.h"
#include "nibble/error_stats.h"
#include "nibble/format.h"
#include "nibble/razer_decoder.h"

namespace nibble {
namespace {

using namespace razer_hw;

// Reference values written from FORMATS.md, independently of the model and the library.
const double kFp4[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
double ref_e3m3(int bits) {
  int e = bits >> 3, m = bits & 7;
  return e == 0 ? m / 32.0 : std::ldexp(1 + m / 8.0, e - 3);
}
double ref_e4m3(int bits) {
  int e = bits >> 3, m = bits & 7;
  return e == 0 ? m / 512.0 : std::ldexp(1 + m / 8.0, e - 7);
}

std::vector<float> grid() { return special_value_grid(); }

TEST(RazerDecoder, PlainFp4Codes) {
  for (int c = 0; c < 16; ++c) {
    double want = (c & 8 ? -1 : 1) * kFp4[c & 7];
    EXPECT_EQ(decode_fp4(uint8_t(c)).value(), want) << "code " << c;
  }
}

TEST(RazerDecoder, OffsetRegisters) {
  // The paper's example: -5.0 comes from an offset register holding 1010b (-1.0).
  EXPECT_EQ(register_bits(encode_offset(5.0f)), "1010");
  EXPECT_EQ(register_bits(encode_offset(9.5f)), "0111");
  EXPECT_EQ(register_bits(encode_offset(2.5f)), "1111");
  EXPECT_EQ(register_bits(encode_offset(6.0f)), "0000");
  for (float v : grid()) {
    uint8_t reg = encode_offset(v);
    EXPECT_LT(reg, 16);
    EXPECT_EQ(6.0 + 0.5 * offset_half_units(reg), v);
    EXPECT_EQ(0.5 * special_magnitude_half_units(reg), v);
  }
  for (float bad : {2.0f, 10.0f, 5.25f, -5.0f, 0.0f, NAN, INFINITY})
    EXPECT_THROW(encode_offset(bad), Error) << bad;
  // -0 offset (1000b) is 6.0 as well: the adder ignores the sign of a zero magnitude.
  EXPECT_EQ(special_magnitude_half_units(0b1000), 12);
}

// Blocks of one row each: row r uses scale bits r % 64 and metadata r / 64; the 16 elements of a
// block are the 16 codes. Every pair {a, b} of the grid (a == b included).
TEST(RazerDecoder, WeightDecoderMatchesLibraryForEveryPairCodeMetaScale) {
  const FormatInfo& f = find_format("nvfp4-razer");
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  PackedTensor t;
  t.format = "nvfp4-razer";
  t.rows = 256;
  t.cols = 16;
  t.block = 16;
  t.qweight.resize(256 * 8);
  t.scales.resize(256);
  for (int r = 0; r < 256; ++r) {
    t.scales[size_t(r)] = uint8_t((r / 64) << 6 | (r % 64));
    for (int j = 0; j < 8; ++j) t.qweight[size_t(r * 8 + j)] = uint8_t((2 * j) | (2 * j + 1) << 4);
  }
  std::vector<float> out(256 * 16);
  for (float a : grid()) {
    for (float b : grid()) {
      const bool exact_gs = rng() & 1;  // gs = 1 checks the bits; a random gs the final multiply
      t.global_scale = exact_gs ? 1.0f : std::uniform_real_distribution<float>(1e-4f, 1.0f)(rng);
      t.sv_a = a;
      t.sv_b = b;
      f.dequantize_rows(t, 0, 256, out.data());
      const WeightDecoder dec = WeightDecoder::for_pair(a, b);
      for (int r = 0; r < 256; ++r) {
        const bool sel = (r / 64) & 1, sign = (r / 64) >> 1;
        for (int c = 0; c < 16; ++c) {
          const double v = dec.decode(uint8_t(c), sel, sign).value() * ref_e3m3(r % 64);
          const float want = float(v * double(t.global_scale));
          const float got = out[size_t(r * 16 + c)];
          if (exact_gs)
            ASSERT_EQ(got, want) << "a " << a << " b " << b << " row " << r << " code " << c;
          else
            ASSERT_NEAR(got, want, 2e-7 * std::fabs(want))
                << "a " << a << " b " << b << " row " << r << " code " << c;
        }
      }
    }
  }
}

// The activation format: scale bits 6..0 E4M3 (0x7F is NaN, skipped), bit 7 the sv sign.
TEST(RazerDecoder, ActivationDecoderMatchesLibraryForEveryMagnitudeCodeSignScale) {
  const FormatInfo& f = find_format("nvfp4-razer-act");
  PackedTensor t;
  t.format = "nvfp4-razer-act";
  t.rows = 254;
  t.cols = 16;
  t.block = 16;
  t.global_scale = 1.0f;
  t.qweight.resize(254 * 8);
  t.scales.resize(254);
  for (int r = 0; r < 254; ++r) {
    t.scales[size_t(r)] = uint8_t((r / 127) << 7 | (r % 127));
    for (int j = 0; j < 8; ++j) t.qweight[size_t(r * 8 + j)] = uint8_t((2 * j) | (2 * j + 1) << 4);
  }
  std::vector<float> out(254 * 16);
  for (float sv : grid()) {
    t.sv_a = sv;
    f.dequantize_rows(t, 0, 254, out.data());
    const ActivationDecoder dec = ActivationDecoder::for_magnitude(sv);
    for (int r = 0; r < 254; ++r)
      for (int c = 0; c < 16; ++c)
        ASSERT_EQ(out[size_t(r * 16 + c)],
                  float(dec.decode(uint8_t(c), r / 127).value() * ref_e4m3(r % 127)))
            << "sv " << sv << " row " << r << " code " << c;
  }
}

}  // namespace
}  // namespace nibble

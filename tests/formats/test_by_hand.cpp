// Small examples worked out by hand from ../shared/FORMATS.md: which scale, special value and
// codes each format must pick, byte for byte, and the bitsandbytes NF4 import.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "formats/random_data.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/half.h"
#include "nibble/nf4.h"

namespace {

using nibble::PackedTensor;

// One row: block 0 holds `lead` (it sets amax and so gs), block 1 starts with `tail`.
std::vector<float> two_blocks(int block, float lead, std::initializer_list<float> tail) {
  std::vector<float> x(size_t(2 * block), 0.0f);
  x[0] = lead;
  std::copy(tail.begin(), tail.end(), x.begin() + block);
  return x;
}
int nib(const PackedTensor& t, size_t i) { return (t.qweight[i / 2] >> (4 * (i % 2))) & 15; }

}  // namespace

TEST(ByHand, NvfpRaZeRPicksTheSpecialValueThatFitsExactly) {
  // amax 180 makes gs = 180 / (30 * 6) = 1. Block 1 = {6, 5, 1, 0.5}: +a = 5 with scale
  // E3M3(6 / 6) = 1 reproduces it exactly.
  auto x = two_blocks(16, 180.0f, {6, 5, 1, 0.5});
  PackedTensor t = nibble::quantize("nvfp4-razer", x.data(), 1, 32);
  EXPECT_EQ(t.global_scale, 1.0f);
  EXPECT_EQ(t.scales[1], 0x18);  // E3M3 1.0 = e 3, m 0; sv +a
  EXPECT_EQ(nib(t, 17), 8);
  EXPECT_EQ(nibble::dequantize(t), x);
  // -5: the -a candidate (bit 7).
  x = two_blocks(16, 180.0f, {6, -5, 1});
  t = nibble::quantize("nvfp4-razer", x.data(), 1, 32);
  EXPECT_EQ(t.scales[1], 0x18 | 0x80);
  EXPECT_EQ(nibble::dequantize(t), x);
  // 8 needs +b (bit 6) with qmax 8: scale E3M3(8 / 8) = 1.
  x = two_blocks(16, 180.0f, {8, 6, 3, -1});
  t = nibble::quantize("nvfp4-razer", x.data(), 1, 32);
  EXPECT_EQ(t.scales[1], 0x18 | 0x40);
  EXPECT_EQ(nib(t, 16), 8);
  EXPECT_EQ(nib(t, 17), 7);
  EXPECT_EQ(nib(t, 18), 5);
  EXPECT_EQ(nib(t, 19), 10);
  EXPECT_EQ(nibble::dequantize(t), x);
  // A custom pair is stored with the tensor and used.
  nibble::QuantOptions opt;
  opt.sv_a = 9.5f, opt.sv_b = 2.5f;
  x = two_blocks(16, 180.0f, {9.5f, 4, 2});
  t = nibble::quantize("nvfp4-razer", x.data(), 1, 32, opt);
  EXPECT_EQ(t.sv_a, 9.5f);
  EXPECT_EQ(t.sv_b, 2.5f);
  EXPECT_EQ(nibble::dequantize(t), x);
}

TEST(ByHand, NvfpRaZeRActivationsPickTheSign) {
  // amax 2688 makes gs = 1; block 1 scale E4M3(6 / 6) = 1 (0x38); -5 is exact with the - sign.
  auto x = two_blocks(16, 2688.0f, {6, -5, 1});
  PackedTensor t = nibble::quantize("nvfp4-razer-act", x.data(), 1, 32);
  EXPECT_EQ(t.scales[1], 0x38 | 0x80);
  EXPECT_EQ(nib(t, 17), 8);
  EXPECT_EQ(nibble::dequantize(t), x);
  x = two_blocks(16, 2688.0f, {6, 5, 1});
  t = nibble::quantize("nvfp4-razer-act", x.data(), 1, 32);
  EXPECT_EQ(t.scales[1], 0x38);
  // No special value helps: the tie goes to +.
  x = two_blocks(16, 2688.0f, {6, 1});
  t = nibble::quantize("nvfp4-razer-act", x.data(), 1, 32);
  EXPECT_EQ(t.scales[1], 0x38);
}

TEST(ByHand, FourOverSixKeepsTheScaleWithLowerError) {
  // gs = 1; block 1 = {4, 3, 2, 1}: scale 4/4 = 1 is exact; 4/6 rounds to E4M3 0.6875 (0x33).
  auto x = two_blocks(16, 2688.0f, {4, 3, 2, 1});
  PackedTensor six = nibble::quantize("nvfp4", x.data(), 1, 32);
  PackedTensor four = nibble::quantize("nvfp4-4over6", x.data(), 1, 32);
  EXPECT_EQ(six.scales[1], 0x33);
  EXPECT_EQ(four.scales[1], 0x38);
  EXPECT_EQ(nibble::dequantize(four), x);
  EXPECT_NE(nibble::dequantize(six), x);
}

TEST(ByHand, MxFP4) {
  // bmax 6: scale 2^(2 - 2) = 1 (E8M0 127); -0.75 ties between 0.5 and 1: even code (1.0).
  float x[4] = {6, 3, -0.75f, 0.1f};
  PackedTensor t = nibble::quantize("mxfp4", x, 1, 4);
  EXPECT_EQ(t.scales[0], 127);
  EXPECT_EQ(t.qweight[0], 7 | (5 << 4));
  EXPECT_EQ(t.qweight[1], 0xA | (0 << 4));
  EXPECT_EQ(t.qweight.size(), 16u);  // the partial block is padded to 32 codes
}

TEST(ByHand, RaZeRGroupFormats) {
  // FP4: {6, 5, 1, 2, -3} * 0.5 is exact with sv +5 and scale 0.5 (FP16 0x3800), gs 1.
  std::vector<float> x(128, 0.0f);
  float v4[5] = {3, 2.5f, 0.5f, 1, -1.5f};
  std::copy(v4, v4 + 5, x.begin());
  PackedTensor t = nibble::quantize("razer-fp4-g128", x.data(), 1, 128);
  EXPECT_EQ(t.global_scale, 1.0f);
  EXPECT_EQ(t.scales[0] | (t.scales[1] << 8), 0x3800);
  EXPECT_EQ(nib(t, 1), 8);
  EXPECT_EQ(nibble::dequantize(t), x);
  // -8 * 0.25: the -b candidate; word = FP16(0.25) | sign | b.
  std::fill(x.begin(), x.end(), 0.0f);
  x[0] = -2.0f, x[1] = 1.5f, x[2] = 0.25f;
  t = nibble::quantize("razer-fp4-g128", x.data(), 1, 128);
  EXPECT_EQ(t.scales[0] | (t.scales[1] << 8), 0x3400 | 0xC000);
  EXPECT_EQ(nibble::dequantize(t), x);
  // FP3: {6, 4, 1, -2} * 0.5 with sv +6 (= b, bit 14); codes 4 (sv), 3, 1, 6 in bit planes.
  std::fill(x.begin(), x.end(), 0.0f);
  x[0] = 3, x[1] = 2, x[2] = 0.5f, x[3] = -1;
  t = nibble::quantize("razer-fp3-g128", x.data(), 1, 128);
  EXPECT_EQ(t.scales[0] | (t.scales[1] << 8), 0x3800 | 0x4000);
  ASSERT_EQ(t.qweight.size(), 48u);  // 4 chunks of 32 codes, 12 bytes each
  EXPECT_EQ(t.qweight[0], 0x06);     // bit 0 of codes: elements 1 (3) and 2 (1)
  EXPECT_EQ(t.qweight[4], 0x0A);     // bit 1: elements 1 (3) and 3 (6)
  EXPECT_EQ(t.qweight[8], 0x09);     // bit 2: elements 0 (4) and 3 (6)
  EXPECT_EQ(nibble::dequantize(t), x);
}

TEST(ByHand, GroupScalesFoldLargeRangesIntoTheGlobalScale) {
  std::vector<float> x(256, 0.0f);
  x[0] = 600.0f, x[1] = -300.0f, x[128] = 1.0f;
  PackedTensor t = nibble::quantize("razer-fp4-g128", x.data(), 1, 256);
  EXPECT_EQ(t.global_scale, 100.0f);
  for (size_t g = 0; g < 2; ++g) {
    uint16_t word = uint16_t(t.scales[2 * g] | (t.scales[2 * g + 1] << 8));
    EXPECT_LT(nibble::half_to_float(word & 0x3FFF), 2.0f);
  }
  EXPECT_EQ(nibble::dequantize(t)[0], 600.0f);
}

TEST(ByHand, NF4Block) {
  // absmax 2: {1, -1, 0, 0.5, 0.08, -0.2} -> codes 15, 0, 7, 12, 8, 5 (the rest 0.0 -> 7).
  std::vector<float> x(64, 0.0f);
  float v[6] = {2, -2, 0, 1, 0.16f, -0.4f};
  std::copy(v, v + 6, x.begin());
  PackedTensor t = nibble::quantize("nf4", x.data(), 1, 64);
  EXPECT_EQ(t.qweight[0], 0x0F);
  EXPECT_EQ(t.qweight[1], 0xC7);
  EXPECT_EQ(t.qweight[2], 0x58);
  EXPECT_EQ(t.qweight[3], 0x77);
  std::vector<float> back = nibble::dequantize(t);
  EXPECT_EQ(back[3], nibble::kNF4Levels[12] * 2.0f);
  EXPECT_EQ(back[5], nibble::kNF4Levels[5] * 2.0f);
}

TEST(ByHand, Int4Group) {
  // {-1, 0, 0.5, 2}: s = FP16(3 / 15) = 0.199951171875 (0x3266), z = round(5.0012) = 5,
  // q = {0, 5, 8, 15}.
  float x[4] = {-1, 0, 0.5f, 2};
  PackedTensor t = nibble::quantize("int4-g128", x, 1, 4);
  EXPECT_EQ(t.scales[0] | (t.scales[1] << 8), 0x3266);
  EXPECT_EQ(t.aux, std::vector<uint8_t>{5});
  EXPECT_EQ(t.qweight[0], 0x50);
  EXPECT_EQ(t.qweight[1], 0xF8);
  std::vector<float> back = nibble::dequantize(t);
  const float s = 0.199951171875f;
  EXPECT_EQ(back, (std::vector<float>{-5 * s, 0, 3 * s, 10 * s}));
}

TEST(ByHand, BitsandbytesNF4Import) {
  // bitsandbytes puts element 0 in the HIGH nibble: 0xF0 = element 0 code 15, element 1 code 0.
  std::vector<uint8_t> packed(32, 0x77);
  packed[0] = 0xF0;
  float absmax = 2.0f;
  PackedTensor t = nibble::nf4_from_bitsandbytes(packed.data(), &absmax, 1, 64, 64);
  std::vector<float> v = nibble::dequantize(t);
  EXPECT_EQ(v[0], 2.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], 0.0f);
  // Round trip: nibble's own quantization, repacked the bitsandbytes way, imports back equal.
  unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::vector<float> x = testdata::matrix(rng, testdata::Dist::Gaussian, 3, 256, 0.02);
  PackedTensor mine = nibble::quantize("nf4", x.data(), 3, 256);
  std::vector<uint8_t> bnb(mine.qweight.size());
  for (size_t i = 0; i < bnb.size(); ++i) bnb[i] = uint8_t((mine.qweight[i] << 4) | (mine.qweight[i] >> 4));
  std::vector<float> absmaxes(mine.scales.size() / 4);
  std::memcpy(absmaxes.data(), mine.scales.data(), mine.scales.size());
  PackedTensor imported = nibble::nf4_from_bitsandbytes(bnb.data(), absmaxes.data(), 3, 256, 64);
  EXPECT_EQ(imported.qweight, mine.qweight);
  EXPECT_EQ(imported.scales, mine.scales);
  EXPECT_EQ(nibble::dequantize(imported), nibble::dequantize(mine));
  EXPECT_THROW(nibble::nf4_from_bitsandbytes(bnb.data(), absmaxes.data(), 3, 100, 64), nibble::Error);
}

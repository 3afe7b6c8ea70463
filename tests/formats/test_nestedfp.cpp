// NestedFP: every FP16 bit pattern; the split / reconstruct helpers and the two registry formats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "nibble/codec.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/half.h"
#include "nibble/nestedfp.h"

namespace {

double fp16_value(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}
bool finite16(uint16_t h) { return ((h >> 10) & 31) != 31; }

}  // namespace

TEST(NestedFP, EveryFP16PatternSplitsAndRebuildsExactly) {
  int eligible = 0;
  for (uint32_t c = 0; c < 65536; ++c) {
    uint16_t w = uint16_t(c);
    bool want = finite16(w) && std::fabs(fp16_value(w)) < 1.875;
    ASSERT_EQ(nibble::nestedfp::eligible(w), want) << std::hex << c;
    if (!want) continue;
    ++eligible;
    nibble::nestedfp::Planes p = nibble::nestedfp::split(w);
    ASSERT_EQ(nibble::nestedfp::reconstruct(p.upper, p.lower), w) << std::hex << c;
    ASSERT_EQ(p.lower, w & 0xFF) << std::hex << c;
    // U read as E4M3 is w * 2^8 rounded to nearest even (saturating, never NaN).
    ASSERT_EQ(p.upper, nibble::kFP8E4M3.encode(fp16_value(w) * 256.0)) << std::hex << c;
  }
  EXPECT_EQ(eligible, 2 * (15 * 1024 + 7 * 128));  // E < 15 or (E = 15, M[9:7] < 7), both signs
}

TEST(NestedFP, RegistryFormatsRoundTripEveryEligibleValue) {
  std::vector<float> x;
  for (uint32_t c = 0; c < 65536; ++c) {
    if (nibble::nestedfp::eligible(uint16_t(c))) x.push_back(nibble::half_to_float(uint16_t(c)));
  }
  int64_t cols = 256, rows = int64_t(x.size()) / cols;
  x.resize(size_t(rows * cols));
  nibble::PackedTensor t = nibble::quantize("nestedfp", x.data(), rows, cols);
  EXPECT_EQ(t.qweight.size(), x.size());
  EXPECT_EQ(t.aux.size(), x.size());
  std::vector<float> back = nibble::dequantize(t);
  ASSERT_EQ(std::memcmp(back.data(), x.data(), x.size() * 4), 0);  // bit for bit, -0 included

  nibble::PackedTensor t8 = nibble::quantize("nestedfp8", x.data(), rows, cols);
  EXPECT_EQ(t8.qweight, t.qweight);
  EXPECT_EQ(t8.aux, t.aux);
  std::vector<float> fp8 = nibble::dequantize(t8);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(double(fp8[i]), nibble::kFP8E4M3.decode(t.qweight[i]) / 256.0) << i;
  }
}

TEST(NestedFP, QuantizeRoundsFloatsToFP16First) {
  float x[3] = {0.1f, -1.0001f, 1e-9f};
  nibble::PackedTensor t = nibble::quantize("nestedfp", x, 1, 3);
  std::vector<float> back = nibble::dequantize(t);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(back[size_t(i)], nibble::half_to_float(nibble::float_to_half(x[i])));
}

TEST(NestedFP, IneligibleTensorsAreRejectedWithTheirName) {
  for (float bad : {1.875f, -1.9f, 100.0f, 1.87495f /* rounds up to 1.875 in FP16 */}) {
    float x[4] = {0.5f, 0.25f, bad, 0.0f};
    nibble::QuantOptions opt;
    opt.name = "layers.3.mlp.up_proj";
    try {
      nibble::quantize("nestedfp", x, 2, 2, opt);
      ADD_FAILURE() << bad << " accepted";
    } catch (const nibble::Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("layers.3.mlp.up_proj"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[1, 0]"), std::string::npos) << msg;
    }
  }
  float ok[2] = {1.874f, -1.87f};  // 1.874 rounds to 1.8740234, the largest eligible FP16
  EXPECT_NO_THROW(nibble::quantize("nestedfp", ok, 1, 2));
}

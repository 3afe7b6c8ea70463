// dequantize_fp16: the host-side FP16 copy of weights the kernels cannot read packed, converted in
// parallel blocks of rows. Equal to the CPU decoder element for element; the first bad element is
// the one reported, whichever block finishes first.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "model/cuda/fp16_weights.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/half.h"

namespace nibble::cuda {
namespace {

std::vector<float> gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// 700 rows of 3008: 348 rows per block, so three blocks, the last one short.
constexpr int64_t kRows = 700, kCols = 3008;

TEST(DequantizeFp16, EqualsTheCpuDecoderAcrossBlocks) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  const std::vector<float> w = gaussian(kRows * kCols, seed);
  for (const char* format : {"nvfp4", "int4-g128", "bf16"}) {
    SCOPED_TRACE(format);
    const PackedTensor t = quantize(format, w.data(), kRows, kCols);
    const std::vector<float> ref = dequantize(t);
    const std::vector<uint16_t> got = dequantize_fp16(t, "w");
    ASSERT_EQ(got.size(), ref.size());
    int64_t bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) bad += got[i] != float_to_half(ref[i]);
    EXPECT_EQ(bad, 0);
  }
}

TEST(DequantizeFp16, NamesTheFirstElementOutOfRange) {
  std::vector<float> w = gaussian(kRows * kCols, 1);
  w[size_t(650 * kCols + 3)] = 1e6f;   // third block
  w[size_t(400 * kCols + 11)] = 7e4f;  // second block: reported, though the third may finish first
  const PackedTensor t = quantize("fp32", w.data(), kRows, kCols);
  try {
    dequantize_fp16(t, "model.layers.0.mlp.up_proj.weight");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.layers.0.mlp.up_proj.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[400, 11]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not fit in FP16"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace nibble::cuda

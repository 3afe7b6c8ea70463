// The format-error measurements behind `nibble formats error` and `sweep-sv`.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nibble/error.h"
#include "nibble/error_stats.h"

namespace nibble {
namespace {

std::vector<ErrorSample> gaussian_samples(uint64_t seed, int64_t rows, int64_t cols) {
  return {{"w0", rows, cols, random_values({}, rows * cols, seed)},
          {"w1", rows / 2, cols, random_values({Distribution::Kind::Laplace}, rows / 2 * cols, seed + 1)}};
}

// format_error pools the squared errors of a round trip through the registry's raw functions.
TEST(FormatLab, FormatErrorIsThePooledRoundTripError) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto samples = gaussian_samples(seed, 8, 256);
  for (const char* name : {"nvfp4", "mxfp4", "nvfp4-razer", "int4-g128"}) {
    const FormatInfo& f = find_format(name);
    double err = 0, ref = 0;
    for (const auto& s : samples) {
      PackedTensor t = f.quantize(s.values.data(), s.rows, s.cols, {});
      std::vector<float> back(s.values.size());
      f.dequantize_rows(t, 0, s.rows, back.data());
      for (size_t i = 0; i < back.size(); ++i) {
        err += (double(s.values[i]) - back[i]) * (double(s.values[i]) - back[i]);
        ref += double(s.values[i]) * s.values[i];
      }
    }
    const ErrorStats st = format_error(samples, name);
    EXPECT_NEAR(st.rel_mse(), err / ref, 1e-9 * err / ref) << name;
    EXPECT_GT(st.rel_mse(), 0.0) << name;  // 4-bit formats cannot be lossless on random data
    EXPECT_EQ(st.count, 8 * 256 + 4 * 256);
  }
}

TEST(FormatLab, MeasureFormatsSortsAndReportsRejections) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto samples = gaussian_samples(seed, 4, 64);
  samples[0].values[3] = 2.5f;  // outside NestedFP's |w| < 1.875
  const auto r = measure_formats(samples, {"nestedfp", "mxfp4", "fp32", "nvfp4"});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r.back().format, "nestedfp");
  EXPECT_FALSE(r.back().rejected.empty());
  EXPECT_EQ(r[0].format, "fp32");
  EXPECT_EQ(r[0].stats.rel_mse(), 0.0);
  for (size_t i = 0; i + 2 < r.size(); ++i) {
    EXPECT_TRUE(r[i].rejected.empty());
    EXPECT_LE(r[i].stats.rel_mse(), r[i + 1].stats.rel_mse());
  }
  EXPECT_THROW(measure_formats(samples, {"nvfp4", "no-such-format"}), Error);
}

TEST(FormatLab, NonFiniteInputIsReportedAsRejection) {
  auto samples = gaussian_samples(fresh_seed(), 2, 32);
  samples[1].values[5] = NAN;
  const auto r = measure_formats(samples, {"nvfp4"});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].rejected.find("w1"), std::string::npos) << r[0].rejected;  // names the tensor
}

TEST(FormatLab, SvSweepIsNormalizedToNvfp4) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto samples = gaussian_samples(seed, 16, 512);
  const SvSweep s = sweep_special_values(samples);
  const auto grid = special_value_grid();
  ASSERT_EQ(grid.size(), 15u);
  EXPECT_EQ(grid.front(), 2.5f);
  EXPECT_EQ(grid.back(), 9.5f);
  ASSERT_EQ(s.single.size(), grid.size());
  ASSERT_EQ(s.with_five.size(), grid.size());
  EXPECT_DOUBLE_EQ(s.nvfp4_rel_mse, format_error(samples, "nvfp4").rel_mse());
  for (size_t i = 0; i < grid.size(); ++i) {
    EXPECT_EQ(s.single[i].sv, grid[i]);
    EXPECT_DOUBLE_EQ(s.single[i].normalized, s.single[i].rel_mse / s.nvfp4_rel_mse);
    QuantOptions o;
    o.sv_a = 5.0f;
    o.sv_b = grid[i];
    EXPECT_DOUBLE_EQ(s.with_five[i].rel_mse, format_error(samples, "nvfp4-razer", o).rel_mse());
  }
}

// Paper 000 Fig. 3: with one pair, the error is lowest near +-5 (the gap between FP4's 4 and 6).
// 2^20 gaussian values make the location stable.
TEST(FormatLab, SlowSingleSpecialValueOptimumNearFive) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<ErrorSample> samples = {{"g", 256, 4096, random_values({}, 256 * 4096, seed)}};
  const SvSweep s = sweep_special_values(samples);
  auto best = std::min_element(s.single.begin(), s.single.end(),
                               [](auto& a, auto& b) { return a.rel_mse < b.rel_mse; });
  EXPECT_GE(best->sv, 4.5f);
  EXPECT_LE(best->sv, 5.5f);
}

}  // namespace
}  // namespace nibble

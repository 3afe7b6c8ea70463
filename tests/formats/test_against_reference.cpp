// Every registered block format against the float64 reference (reference_formats.cpp): the
// fast path's bytes must be identical, and so must the dequantized values.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "formats/random_data.h"
#include "formats/reference_formats.h"
#include "nibble/format.h"

namespace {

using nibble::PackedTensor;

std::string first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return "byte " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
  }
  return "";
}

void expect_same(const PackedTensor& fast, const PackedTensor& want) {
  EXPECT_EQ(fast.format, want.format);
  EXPECT_EQ(fast.rows, want.rows);
  EXPECT_EQ(fast.cols, want.cols);
  EXPECT_EQ(fast.block, want.block);
  EXPECT_EQ(first_difference(fast.qweight, want.qweight), "") << "qweight";
  EXPECT_EQ(first_difference(fast.scales, want.scales), "") << "scales";
  EXPECT_EQ(first_difference(fast.aux, want.aux), "") << "aux";
  EXPECT_EQ(fast.global_scale, want.global_scale);
  EXPECT_EQ(fast.sv_a, want.sv_a);
  EXPECT_EQ(fast.sv_b, want.sv_b);
}

void expect_same_values(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], 4), 0) << "element " << i << ": " << a[i] << " vs " << b[i];
  }
}

// Dequantizing one row at a time must give what the whole-tensor call gives.
void expect_rows_match(const PackedTensor& t, const std::vector<float>& whole) {
  const nibble::FormatInfo& f = nibble::find_format(t.format);
  std::vector<float> row(size_t(t.cols));
  for (int64_t r = 0; r < t.rows; ++r) {
    f.dequantize_rows(t, r, 1, row.data());
    ASSERT_EQ(std::memcmp(row.data(), &whole[size_t(r * t.cols)], size_t(t.cols) * 4), 0) << "row " << r;
  }
}

struct Shape {
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{1, 1}, {1, 7}, {2, 16}, {3, 33}, {5, 129}, {4, 300}, {2, 1000}, {64, 512}};

void check_format(const nibble::FormatInfo& f, const ref::Options& ropt, const nibble::QuantOptions& opt) {
  unsigned seed = std::random_device{}();
  SCOPED_TRACE(std::string(f.name) + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  bool nested = f.name.starts_with("nestedfp");
  for (testdata::Dist d : testdata::kDists) {
    for (Shape s : kShapes) {
      if (s.rows * s.cols > 10000 && d != testdata::Dist::Gaussian) continue;  // the parallel path, once
      SCOPED_TRACE(std::string(testdata::dist_name(d)) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols));
      double scale = std::exp2(std::uniform_int_distribution<int>(-12, 3)(rng));
      if (nested) scale = std::fmin(scale, 0.05);
      std::vector<float> x = testdata::matrix(rng, d, s.rows, s.cols, scale, nested ? 1.8 : INFINITY);
      PackedTensor fast = f.quantize(x.data(), s.rows, s.cols, opt);
      PackedTensor want = ref::quantize(f.name, x, s.rows, s.cols, ropt);
      expect_same(fast, want);
      if (::testing::Test::HasFailure()) return;
      std::vector<float> values = nibble::dequantize(fast);
      expect_same_values(values, ref::dequantize(want));
      expect_rows_match(fast, values);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace

TEST(AgainstReference, EveryFormatDefaultOptions) {
  for (const nibble::FormatInfo& f : nibble::all_formats()) check_format(f, {}, {});
}

TEST(AgainstReference, OtherSpecialValuesAndBlocks) {
  check_format(nibble::find_format("nvfp4-razer"), {0, 3.5f, 9.5f}, {0, 3.5f, 9.5f, "w"});
  check_format(nibble::find_format("nvfp4-razer"), {0, 6.0f, 4.0f}, {0, 6.0f, 4.0f, "w"});  // sv on a level
  check_format(nibble::find_format("nvfp4-razer-act"), {0, 7.0f, 0}, {0, 7.0f, 0, "a"});
  check_format(nibble::find_format("razer-fp4-g128"), {64, 2.5f, 7.5f}, {64, 2.5f, 7.5f, "w"});
  check_format(nibble::find_format("razer-fp3-g128"), {32, 5.0f, 8.0f}, {32, 5.0f, 8.0f, "w"});
  check_format(nibble::find_format("fp4-g128"), {256, 0, 0}, {256, 0, 0, "w"});
  check_format(nibble::find_format("int4-g128"), {64, 0, 0}, {64, 0, 0, "w"});
  for (int b : {32, 128, 4096}) check_format(nibble::find_format("nf4"), {b, 0, 0}, {b, 0, 0, "w"});
}

// W4A16 tensor-core GEMM vs float64 on the registry's own dequantization (format.h), for random
// packed weights (every code, special values included) drawn fresh each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_buffer.h"
#include "nibble/cuda/bench.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/half.h"
#include "test_gemm_ref.h"

namespace {

using namespace nibble;
using namespace nibble::cuda;
using namespace nibble::cuda::test;

class GemmW4A16 : public ::testing::TestWithParam<const char*> {};

TEST_P(GemmW4A16, MatchesFloat64OnTheDequantizedWeights) {
  const std::string format = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(format + " seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int N = 136, K = 384;  // N not a multiple of the 128-column tile
  const PackedTensor t = random_packed(format, N, K, seed);
  const std::vector<float> w = dequantize(t);
  GemmWeight dw = upload_gemm(t, format);
  // nvfp4(-razer) and mxfp4 weights times their scales are exact in fp16; the FP16-scale formats
  // and nf4 round each weight to fp16 (relative 2^-11) inside the kernel.
  const bool exact = format.rfind("nvfp4", 0) == 0 || format == "mxfp4";
  const double rel = (exact ? 0.0 : std::ldexp(1.0, -11)) + 1e-5;
  GemmWorkspace ws;
  for (int M : {1, 3, 16, 64, 65, 130, 257}) {
    for (int split : {0, 1, 2}) {
      SCOPED_TRACE("M " + std::to_string(M) + " split " + std::to_string(split));
      const std::vector<uint16_t> xh = random_halves(size_t(M) * K, g, 1.0f);
      GpuBuffer<uint16_t> x(xh), y(size_t(M) * N);
      y.poison();
      gemm(x.get(), M, dw, y.get(), ws, nullptr, GemmOptions{split});
      const RefResult ref = reference_gemm(
          M, N, K, [&](int m, int k) { return double(half_to_float(xh[size_t(m) * K + k])); },
          [&](int n, int k) { return double(w[size_t(n) * K + k]); });
      std::string first;
      EXPECT_EQ(count_bad(y.host(), ref, rel, &first), 0) << first;
    }
  }
}

// The cuBLAS path's dequantization: every weight within one fp16 rounding of the registry's
// float value (a fresh random tensor; N, K not multiples of the 128 tiles).
TEST_P(GemmW4A16, DequantizeFp16IsTheRoundedRegistryValue) {
  const std::string format = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(format + " seed " + std::to_string(seed));
  const int N = 72, K = 384;
  const PackedTensor t = random_packed(format, N, K, seed);
  const std::vector<float> w = dequantize(t);
  GemmWeight dw = upload_gemm(t, format);
  GpuBuffer<uint16_t> out(size_t(N) * K);
  out.poison();
  dequantize_fp16(dw, out.get(), nullptr);
  const std::vector<uint16_t> got = out.host();
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = w[i], v = half_to_float(got[i]);
    const double ulp = std::ldexp(1.0, std::max(-24, int(std::floor(std::log2(std::fabs(want) + 1e-30))) - 10));
    if (!(std::fabs(v - want) <= 0.5 * ulp * (1 + 1e-3)) && bad++ == 0)
      ADD_FAILURE() << "index " << i << ": got " << v << ", want " << want;
  }
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(GemmFormats, GemmW4A16,
                         ::testing::Values("nvfp4", "nvfp4-razer", "fp4-g128", "razer-fp4-g128", "int4-g128", "mxfp4",
                                           "nf4"),
                         FormatName());

TEST(GemmW4A16Errors, RejectsUnsupportedFormatsAndShapes) {
  const PackedTensor fp3 = random_packed("razer-fp3-g128", 16, 128, 1);
  EXPECT_THROW(upload_gemm(fp3, "layer.w"), Error);
  PackedTensor mx = random_packed("mxfp4", 16, 64, 4);  // scales spanning 2^100: beyond fp16
  mx.scales[0] = 20, mx.scales[1] = 120;
  mx.qweight[0] = mx.qweight[16] = 0x11;
  EXPECT_THROW(upload_gemm(mx, "layer.w"), Error);
  PackedTensor t = random_packed("nvfp4", 16, 64, 2);
  t.scales.pop_back();
  EXPECT_THROW(upload_gemm(t, "layer.w"), Error);
  const PackedTensor odd = random_packed("nvfp4", 12, 64, 3);  // N not a multiple of 8
  EXPECT_THROW(upload_gemm(odd, "layer.w"), Error);
}

}  // namespace

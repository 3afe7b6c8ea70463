// The fused small-M decode-dot kernels against a float64 reference of X · dequant(W)^T, with W
// decoded by the registry's own dequantize_rows (written separately from the fused path).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/fused_gemv.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/linear.h"

namespace nibble {
namespace {

struct Case {
  const char* format;
  int block;  // 0: default
  float sv_a = 0.0f, sv_b = 0.0f;
};

const Case kCases[] = {{"nvfp4", 0},       {"nvfp4-4over6", 0}, {"nvfp4-razer", 0},
                       {"nvfp4-razer", 0, 2.5f, 9.5f}, {"mxfp4", 0}, {"nf4", 0}, {"nf4", 128},
                       {"nf4", 32}, {"int4-g128", 0}, {"int4-g128", 64},
                       {"fp4-g128", 0}, {"fp4-g128", 96}, {"razer-fp4-g128", 0},
                       {"razer-fp4-g128", 32, 3.0f, 7.5f}, {"bf16", 0}, {"fp16", 0}};

std::vector<float> heavy_tailed(std::mt19937& gen, size_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen) * (u(gen) < 0.05f ? 8.0f : 1.0f);  // outliers exercise RaZeR's sv
  return v;
}

// Checks fused_linear_cpu (and linear_cpu, which must route to it) on W [N, K] for M in 1..4.
void check(const Case& c, const std::vector<float>& wf, int64_t N, int64_t K, std::mt19937& gen,
           unsigned seed) {
  QuantOptions opt;
  opt.block = c.block, opt.sv_a = c.sv_a, opt.sv_b = c.sv_b;
  const PackedTensor w = quantize(c.format, wf.data(), N, K, opt);
  std::vector<float> dq(size_t(N * K));
  find_format(c.format).dequantize_rows(w, 0, N, dq.data());
  for (int64_t M = 1; M <= cpu::kFusedMaxM; ++M) {
    const std::vector<float> x = heavy_tailed(gen, size_t(M * K));
    std::vector<float> y(size_t(M * N), -1.0f), y2(size_t(M * N), -2.0f);
    ASSERT_TRUE(cpu::fused_linear_cpu(x.data(), M, w, y.data())) << c.format;
    linear_cpu(x.data(), M, w, y2.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(x[size_t(m * K + k)]) * dq[size_t(n * K + k)];
          ref += p, mag += std::fabs(p);
        }
        const size_t i = size_t(m * N + n);
        ASSERT_NEAR(y[i], ref, 1e-5 * mag + 1e-30)
            << c.format << " block " << w.block << " M " << M << " N " << N << " K " << K << " m "
            << m << " n " << n << " seed " << seed;
        ASSERT_EQ(y[i], y2[i]) << c.format << " linear_cpu did not take the fused path, seed " << seed;
      }
  }
}

TEST(FusedLinear, MatchesFloat64ReferenceOnOddShapes) {
  const unsigned seed = std::random_device{}();
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> odd_k(70, 400), any_n(1, 37);
  for (const Case& c : kCases) {
    int64_t K = odd_k(gen) | 1, N = any_n(gen);  // odd K: the last block is partial
    check(c, heavy_tailed(gen, size_t(N * K)), N, K, gen, seed);
    check(c, heavy_tailed(gen, size_t(3 * 256)), 3, 256, gen, seed);  // whole blocks only
  }
}

TEST(FusedLinear, LargeMatrixRunsThreadedAndAgrees) {
  const unsigned seed = std::random_device{}();
  std::mt19937 gen(seed);
  const int64_t N = 1031, K = 1027;  // M N K above the threading threshold even at M = 1
  check({"nvfp4", 0}, heavy_tailed(gen, size_t(N * K)), N, K, gen, seed);
  check({"nf4", 0}, heavy_tailed(gen, size_t(N * K)), N, K, gen, seed);
}

TEST(FusedLinear, ZeroWeightsGiveExactZeros) {
  const unsigned seed = std::random_device{}();
  std::mt19937 gen(seed);
  for (const Case& c : kCases) {
    const std::vector<float> zeros(size_t(5 * 33), 0.0f);
    check(c, zeros, 5, 33, gen, seed);
    const PackedTensor w = quantize(c.format, zeros.data(), 5, 33);
    const std::vector<float> x = heavy_tailed(gen, 2 * 33);
    std::vector<float> y(10, 1.0f);
    ASSERT_TRUE(cpu::fused_linear_cpu(x.data(), 2, w, y.data()));
    for (float v : y) EXPECT_EQ(v, 0.0f) << c.format;
  }
}

TEST(FusedLinear, DeclinesWhatItDoesNotCover) {
  std::mt19937 gen(1);
  const std::vector<float> wf = heavy_tailed(gen, 4 * 40), x = heavy_tailed(gen, 5 * 40);
  std::vector<float> y(20);
  PackedTensor w = quantize("nvfp4", wf.data(), 4, 40);
  EXPECT_FALSE(cpu::fused_linear_cpu(x.data(), 5, w, y.data()));  // M above the fused range
  EXPECT_FALSE(cpu::fused_linear_cpu(x.data(), 0, w, y.data()));
  PackedTensor fp32 = quantize("fp32", wf.data(), 4, 40);
  EXPECT_FALSE(cpu::fused_linear_cpu(x.data(), 1, fp32, y.data()));
  // A truncated scale plane is left to the generic path, which names the fault.
  w.scales.pop_back();
  EXPECT_FALSE(cpu::fused_linear_cpu(x.data(), 1, w, y.data()));
  EXPECT_THROW(linear_cpu(x.data(), 1, w, y.data()), Error);
  PackedTensor i4 = quantize("int4-g128", wf.data(), 4, 40);
  i4.aux.pop_back();  // zero points of the last row missing
  EXPECT_FALSE(cpu::fused_linear_cpu(x.data(), 1, i4, y.data()));
  EXPECT_THROW(linear_cpu(x.data(), 1, i4, y.data()), Error);
  PackedTensor r = quantize("nvfp4-razer", wf.data(), 4, 40);
  r.sv_a = 3.3f;  // not a multiple of 0.5
  EXPECT_FALSE(cpu::fused_linear_cpu(x.data(), 1, r, y.data()));
  EXPECT_THROW(linear_cpu(x.data(), 1, r, y.data()), Error);
}

}  // namespace
}  // namespace nibble

// The Hopper wgmma GEMMs (gemm_wgmma_*.cu) against a float64 reference on the registry's own
// dequantization, and against the mma.sync kernels (same fp16 weights: equal up to the FP32
// accumulation order), on random weights and activations drawn fresh each run. Skipped on GPUs
// other than sm_90.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_buffer.h"
#include "kernels/cuda/gemm_kernels.cuh"
#include "kernels/cuda/gemm_wgmma.cuh"
#include "nibble/cuda/bench.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/half.h"
#include "nibble/nestedfp.h"
#include "test_gemm_ref.h"

namespace {

using namespace nibble;
using namespace nibble::cuda;
using namespace nibble::cuda::test;

constexpr int kMs[] = {1, 64, 127, 128, 129, 512, 1000};

// One uploaded weight and its float values [N, K] (global scale included).
struct Weight {
  std::string format;
  GemmWeight dw;
  std::vector<float> w;
  int N, K;
};

// Random eligible FP16 weights for NestedFP with edge cases mixed in (zeros of both signs,
// subnormals, the largest eligible magnitudes).
Weight nested_weight(int N, int K, std::mt19937_64& g) {
  const uint16_t edges[] = {0x0000, 0x8000, 0x0001, 0x83FF, 0x3F7F, 0xBF7F, 0x3C40, 0x2E41, 0x0400};
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> w(size_t(N) * K);
  for (size_t i = 0; i < w.size(); ++i) w[i] = i % 89 < 9 ? half_to_float(edges[i % 89]) : half_to_float(float_to_half(d(g)));
  const PackedTensor t = quantize("nestedfp", w.data(), N, K);
  std::vector<float> rebuilt(w.size());
  for (size_t i = 0; i < w.size(); ++i) rebuilt[i] = half_to_float(nestedfp::reconstruct(t.qweight[i], t.aux[i]));
  return {"nestedfp", upload_gemm(t, "nestedfp"), rebuilt, N, K};
}

Weight make_weight(const std::string& format, int N, int K, uint64_t seed, std::mt19937_64& g) {
  if (format == "nestedfp") return nested_weight(N, K, g);
  const PackedTensor t = random_packed(format, N, K, seed);
  return {format, upload_gemm(t, format), dequantize(t), N, K};
}

void run_wgmma(const Weight& w, const uint16_t* x, int M, uint16_t* y, GemmWorkspace& ws, int split, int block_m,
               const float* row_scale) {
  if (w.format == "nestedfp") {
    wg::nestedfp16(x, M, static_cast<const uint8_t*>(w.dw.codes), static_cast<const uint8_t*>(w.dw.meta), w.N, w.K, y,
                   ws, split, nullptr, block_m);
  } else {
    wg::w4a16(x, M, static_cast<const uint32_t*>(w.dw.codes), static_cast<const uint32_t*>(w.dw.meta), w.dw.block,
              tc::w4_decode(w.format), w.N, w.K, w.dw.global_scale, y, ws, split, nullptr, row_scale, block_m);
  }
}

void run_mma_sync(const Weight& w, const uint16_t* x, int M, uint16_t* y, GemmWorkspace& ws, const float* row_scale) {
  if (w.format == "nestedfp") {
    tc::nestedfp16(x, M, static_cast<const uint8_t*>(w.dw.codes), static_cast<const uint8_t*>(w.dw.meta), w.N, w.K, y,
                   ws, 1, nullptr);
  } else {
    tc::w4a16(x, M, static_cast<const uint32_t*>(w.dw.codes), static_cast<const uint32_t*>(w.dw.meta), w.dw.block,
              tc::w4_decode(w.format), w.N, w.K, w.dw.global_scale, y, ws, 1, nullptr, row_scale);
  }
}

// Two FP32 accumulations of the same products in different orders, each rounded to fp16 once.
int count_order_mismatch(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const RefResult& ref,
                         std::string* first) {
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double va = half_to_float(a[i]), vb = half_to_float(b[i]);
    const double tol = std::ldexp(std::max(std::fabs(va), std::fabs(vb)), -10) + 1e-5 * ref.abs_sum[i] + 1e-7;
    if (!(std::fabs(va - vb) <= tol) && bad++ == 0 && first)
      *first = "index " + std::to_string(i) + ": wgmma " + std::to_string(va) + ", mma.sync " + std::to_string(vb);
  }
  return bad;
}

class GemmWgmma : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!wg::supported()) GTEST_SKIP() << "wgmma needs an sm_90 GPU";
  }
};

// For each M: both tile heights, default and forced split-K, all against float64 and the mma.sync
// kernel. W4A4's per-row scale (epilogue) is exercised on every other M.
TEST_P(GemmWgmma, MatchesFloat64AndTheMmaSyncKernel) {
  const std::string format = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(format + " seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  // the first shape: N not a multiple of the 128-column tile, K of 6 k-tiles
  for (auto [N, K] : {std::pair{136, 384}, std::pair{264, 1024}}) {
    const Weight w = make_weight(format, N, K, seed, g);
    // nvfp4(-razer), mxfp4 and nestedfp weights times activations are exact products; the FP16-scale
    // formats and nf4 round each weight to fp16 (relative 2^-11) inside the kernel.
    const bool exact = format.rfind("nvfp4", 0) == 0 || format == "mxfp4" || format == "nestedfp";
    const double rel = (exact ? 0.0 : std::ldexp(1.0, -11)) + 1e-5;
    GemmWorkspace ws;
    for (int M : kMs) {
      if (K > 384 && M != 1 && M != 129 && M != 512) continue;  // the larger shape: a few M
      SCOPED_TRACE("N " + std::to_string(N) + " K " + std::to_string(K) + " M " + std::to_string(M));
      const std::vector<uint16_t> xh = random_halves(size_t(M) * K, g, 1.0f);
      const bool scaled = format != "nestedfp" && M % 2 == 1;
      std::vector<float> rs(size_t(M), 1.0f);
      if (scaled)
        for (auto& s : rs) s = std::ldexp(1.0f + float(g() % 1024) / 1024.0f, int(g() % 7) - 3);
      GpuBuffer<uint16_t> x(xh), y(size_t(M) * N), y_ref(size_t(M) * N);
      GpuBuffer<float> row_scale(rs);
      const float* rsp = scaled ? row_scale.get() : nullptr;
      const RefResult ref = reference_gemm(
          M, N, K, [&](int m, int k) { return double(half_to_float(xh[size_t(m) * K + k])) * rs[size_t(m)]; },
          [&](int n, int k) { return double(w.w[size_t(n) * K + k]); });
      y_ref.poison();
      run_mma_sync(w, x.get(), M, y_ref.get(), ws, rsp);
      const std::vector<uint16_t> mma = y_ref.host();
      for (int block_m : {128, 256})
        for (int split : {0, 1, 3}) {
          SCOPED_TRACE("block_m " + std::to_string(block_m) + " split " + std::to_string(split));
          y.poison();
          run_wgmma(w, x.get(), M, y.get(), ws, split, block_m, rsp);
          const std::vector<uint16_t> got = y.host();
          std::string first;
          EXPECT_EQ(count_bad(got, ref, rel, &first), 0) << first;
          EXPECT_EQ(count_order_mismatch(got, mma, ref, &first), 0) << first;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(GemmWgmmaFormats, GemmWgmma,
                         ::testing::Values("nestedfp", "nvfp4", "nvfp4-razer", "fp4-g128", "razer-fp4-g128", "int4-g128",
                                           "mxfp4", "nf4"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s) c = c == '-' ? '_' : c;
                           return s;
                         });

// Zero activations give exact zeros (no stale shared memory or accumulators leak in), and rows
// past M are never written.
TEST(GemmWgmmaEdges, ZeroActivationsAndRowsPastM) {
  if (!wg::supported()) GTEST_SKIP() << "wgmma needs an sm_90 GPU";
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int N = 128, K = 256, M = 70;
  const Weight w = make_weight("nvfp4", N, K, seed, g);
  GemmWorkspace ws;
  GpuBuffer<uint16_t> x(std::vector<uint16_t>(size_t(M) * K, 0)), y(size_t(M + 2) * N);
  for (int block_m : {128, 256}) {
    y.poison();
    run_wgmma(w, x.get(), M, y.get(), ws, 1, block_m, nullptr);
    const std::vector<uint16_t> out = y.host();
    for (size_t i = 0; i < out.size(); ++i) {
      const bool past_m = i >= size_t(M) * N;
      ASSERT_EQ(out[i] & 0x7FFF, past_m ? 0x7FFF : 0) << "index " << i << " block_m " << block_m;
    }
  }
}

TEST(GemmWgmmaEdges, RejectsUnsupportedShapes) {
  GemmWorkspace ws;
  // checked on the host before any launch, so no device memory is touched
  EXPECT_THROW(wg::w4a16(nullptr, 4, nullptr, nullptr, 16, tc::W4Decode::fp4, 128, 96, 1.0f, nullptr, ws, 0, nullptr),
               Error);
  EXPECT_THROW(wg::w4a16(nullptr, 0, nullptr, nullptr, 16, tc::W4Decode::fp4, 128, 128, 1.0f, nullptr, ws, 0, nullptr),
               Error);
  EXPECT_THROW(wg::w4a16(nullptr, 4, nullptr, nullptr, 48, tc::W4Decode::fp4, 128, 192, 1.0f, nullptr, ws, 0, nullptr),
               Error);
  EXPECT_THROW(wg::nestedfp16(nullptr, 4, nullptr, nullptr, 12, 128, nullptr, ws, 0, nullptr), Error);
  EXPECT_THROW(wg::nestedfp16(nullptr, 4, nullptr, nullptr, 128, 64, nullptr, ws, 0, nullptr, 64), Error);
}

}  // namespace

// The Hopper wgmma GEMMs (gemm_wgmma_*.cu) against a float64 reference on the registry's own
// dequantization, and against the mma.sync kernels (same fp16 weights: equal up to the FP32
// accumulation order), on random weights and activations drawn fresh each run. Skipped on GPUs
// other than sm_90.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_buffer.h"
#include "kernels/cuda/gemm_kernels.cuh"
#include "kernels/cuda/gemm_wgmma.cuh"
#include "nibble/cuda/bench.h"
#include "nibble/cuda/check.h"
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
  const std::vector<float> w = nested_eligible_weights(N, K, g);
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

void run_wgmma(const Weight& w, const uint16_t* x, int M, uint16_t* y, GemmWorkspace& ws, int split,
               const float* row_scale) {
  if (w.format == "nestedfp") {
    wg::nestedfp16(x, M, static_cast<const uint8_t*>(w.dw.codes), static_cast<const uint8_t*>(w.dw.meta), w.N, w.K, y,
                   ws, split, nullptr);
  } else {
    wg::w4a16(x, M, static_cast<const uint32_t*>(w.dw.codes), static_cast<const uint32_t*>(w.dw.meta), w.dw.block,
              tc::w4_decode(w.format), w.N, w.K, w.dw.global_scale, y, ws, split, nullptr, row_scale);
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

class GemmWgmma : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!wg::supported()) GTEST_SKIP() << "wgmma needs an sm_90 GPU";
  }
};

// For each M (64-, 128- and 256-token tiles): default and forced split-K, all against float64 and
// the mma.sync kernel. W4A4's per-row scale (epilogue) is exercised on every other M.
TEST_P(GemmWgmma, MatchesFloat64AndTheMmaSyncKernel) {
  const std::string format = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(format + " seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  // the first shape: N not a multiple of the 128-row weight tile, K of 6 k-tiles
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
      const std::vector<float> rs = scaled ? random_row_scales(M, g) : std::vector<float>(size_t(M), 1.0f);
      GpuBuffer<uint16_t> x(xh), y(size_t(M) * N), y_ref(size_t(M) * N);
      GpuBuffer<float> row_scale(rs);
      const float* rsp = scaled ? row_scale.get() : nullptr;
      const RefResult ref = reference_gemm(
          M, N, K, [&](int m, int k) { return double(half_to_float(xh[size_t(m) * K + k])) * rs[size_t(m)]; },
          [&](int n, int k) { return double(w.w[size_t(n) * K + k]); });
      y_ref.poison();
      run_mma_sync(w, x.get(), M, y_ref.get(), ws, rsp);
      const std::vector<uint16_t> mma = y_ref.host();
      for (int split : {0, 1, 3}) {
        SCOPED_TRACE("split " + std::to_string(split));
        y.poison();
        run_wgmma(w, x.get(), M, y.get(), ws, split, rsp);
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
                         FormatName());

// Zero activations give exact zeros (no stale shared memory or accumulators leak in), and rows
// past M are never written.
TEST(GemmWgmmaEdges, ZeroActivationsAndRowsPastM) {
  if (!wg::supported()) GTEST_SKIP() << "wgmma needs an sm_90 GPU";
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int N = 128, K = 256;
  GemmWorkspace ws;
  for (const char* format : {"nvfp4", "nestedfp"}) {
    const Weight w = make_weight(format, N, K, seed, g);
    for (int M : {40, 70, 200}) {  // the 64-, 128- and 256-token tiles
      GpuBuffer<uint16_t> x(std::vector<uint16_t>(size_t(M) * K, 0)), y(size_t(M + 2) * N);
      y.poison();
      run_wgmma(w, x.get(), M, y.get(), ws, 1, nullptr);
      const std::vector<uint16_t> out = y.host();
      for (size_t i = 0; i < out.size(); ++i) {
        const bool past_m = i >= size_t(M) * N;
        ASSERT_EQ(out[i] & 0x7FFF, past_m ? 0x7FFF : 0) << format << " M " << M << " index " << i;
      }
    }
  }
}

// NestedFP16 rebuilds the weights exactly: X = identity gives W^T bit for bit (one product per
// output), for every token-tile height.
TEST(GemmWgmmaEdges, NestedIdentityGivesTheWeightBits) {
  if (!wg::supported()) GTEST_SKIP() << "wgmma needs an sm_90 GPU";
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  GemmWorkspace ws;
  for (auto [N, K] : {std::pair{136, 64}, std::pair{264, 128}, std::pair{128, 1024}}) {  // M = K: 64, 128, 1024 rows
    SCOPED_TRACE("N " + std::to_string(N) + " K " + std::to_string(K));
    const std::vector<float> w = nested_eligible_weights(N, K, g);
    const PackedTensor t = quantize("nestedfp", w.data(), N, K);
    const GemmWeight dw = upload_gemm(t);  // the planes in KOrder::nested
    std::vector<uint16_t> eye(size_t(K) * K, 0);
    for (int i = 0; i < K; ++i) eye[size_t(i) * K + i] = 0x3C00;
    GpuBuffer<uint16_t> x(eye), y(size_t(K) * N);
    y.poison();
    wg::nestedfp16(x.get(), K, static_cast<const uint8_t*>(dw.codes), static_cast<const uint8_t*>(dw.meta), N, K,
                   y.get(), ws, 1, nullptr);
    const std::vector<uint16_t> got = y.host();
    int bad = 0;
    for (int m = 0; m < K; ++m)
      for (int n = 0; n < N; ++n) {
        const uint16_t want = nestedfp::reconstruct(t.qweight[size_t(n) * K + m], t.aux[size_t(n) * K + m]);
        const uint16_t have = got[size_t(m) * N + n];
        // -0 * 1 + 0 * ... sums to +0 in fp32: zeros compare by value
        bad += want != have && !((want & 0x7FFF) == 0 && (have & 0x7FFF) == 0);
      }
    EXPECT_EQ(bad, 0) << "outputs that are not the weight's bits";
  }
}

// Diagnosis, not a check: the register-A W4A16 GEMM's time on the same weights with activations of
// different kinds (normal random, W4A4's NVFP4-quantized ones, zeros), alternating; median us per
// call of a CUDA-graph replay (time_rotated_us, as the bench times). Opt-in.
TEST(GemmWgmmaTiming, ActivationKinds) {
  if (!wg::supported()) GTEST_SKIP() << "wgmma needs an sm_90 GPU";
  if (!std::getenv("NIBBLE_W4A4_TIMING")) GTEST_SKIP() << "set NIBBLE_W4A4_TIMING=1 for the timing table";
  std::mt19937_64 g(5);
  cudaStream_t st;
  NIBBLE_CUDA_CHECK(cudaStreamCreate(&st));
  GemmWorkspace ws;
  for (auto [N, K, M] : {std::tuple{28672, 4096, 256}, std::tuple{4096, 4096, 2048}}) {
    const PackedTensor t = random_packed("nvfp4", N, K, 3);
    const GemmWeight w = upload_gemm(t, "nvfp4");
    GpuBuffer<uint16_t> x(random_halves(size_t(M) * K, g, 1.0f)), xq(size_t(M) * K), zero(std::vector<uint16_t>(size_t(M) * K, 0)),
        y(size_t(M) * N);
    GpuBuffer<float> rs{size_t(M)};
    quantize_rows_nvfp4(x.get(), M, K, "nvfp4", 0.0f, xq.get(), rs.get(), st);
    struct Kind {
      const char* name;
      const uint16_t* x;
      const float* row_scale;
    };
    const Kind kinds[] = {{"random", x.get(), nullptr},
                          {"random + row scale", x.get(), rs.get()},
                          {"nvfp4-quantized + row scale", xq.get(), rs.get()},
                          {"zeros", zero.get(), nullptr}};
    for (int pass = 0; pass < 3; ++pass)
      for (const Kind& k : kinds) {
        const double us = time_rotated_us(
            [&](int, cudaStream_t q) {
              wg::w4a16(k.x, M, static_cast<const uint32_t*>(w.codes), static_cast<const uint32_t*>(w.meta), w.block,
                        tc::W4Decode::fp4, N, K, w.global_scale, y.get(), ws, 0, q, k.row_scale);
            },
            1, st, 20, 5);
        std::printf("N %d K %d M %d pass %d %-28s %8.1f us\n", N, K, M, pass, k.name, us);
      }
  }
  NIBBLE_CUDA_CHECK(cudaStreamDestroy(st));
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
  EXPECT_THROW(wg::nestedfp16(nullptr, 4, nullptr, nullptr, 128, 32, nullptr, ws, 0, nullptr), Error);
  EXPECT_THROW(wg::nestedfp16(nullptr, 0, nullptr, nullptr, 128, 128, nullptr, ws, 0, nullptr), Error);
}

}  // namespace

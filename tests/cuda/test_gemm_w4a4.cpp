// W4A4 on the GPU: the per-token activation quantizer against the CPU format library (bit for
// bit), and the W4A4 GEMM against float64 on both dequantized operands. Fresh random data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

// Rows of varied character: gaussian, heavy outliers, tiny (near fp16 subnormal), all zero, and
// ties: the row maximum 2688 makes the global scale 1, and every other block holds the FP4
// rounding thresholds (0.25 .. 5) and the top level 6, both signs, times a power of two, so its
// block scale is that power and each element sits exactly on a decision boundary.
std::vector<uint16_t> activation_rows(int M, int K, std::mt19937_64& g) {
  std::vector<uint16_t> x(size_t(M) * K);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::student_t_distribution<float> t3(3.0f);
  constexpr float kTies[8] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) {
      float v = 0;
      switch (m % 5) {
        case 0: v = n01(g); break;
        case 1: v = t3(g) * 4.0f; break;
        case 2: v = n01(g) * 1e-4f; break;
        case 3: v = 0.0f; break;
        default:
          v = k == 0 ? 2688.0f
                     : k < 16 ? 0.0f : std::ldexp(kTies[k % 8] * (k % 16 < 8 ? 1.0f : -1.0f), (k / 16) % 5 - 2);
      }
      x[size_t(m) * K + k] = float_to_half(v);
    }
  return x;
}

// The CPU format library's fake quantization of each row (as the CPU runtime applies it).
std::vector<float> cpu_fake_quant(const std::vector<uint16_t>& x, int M, int K, const std::string& act, float sv,
                                  std::vector<float>* gs) {
  const FormatInfo& f = find_format(act);
  std::vector<float> out(size_t(M) * K), row(static_cast<size_t>(K));
  for (int m = 0; m < M; ++m) {
    for (int k = 0; k < K; ++k) row[size_t(k)] = half_to_float(x[size_t(m) * K + k]);
    QuantOptions o;
    o.sv_a = sv;
    const PackedTensor p = f.quantize(row.data(), 1, K, o);
    f.dequantize_rows(p, 0, 1, out.data() + size_t(m) * K);
    gs->push_back(p.global_scale);
  }
  return out;
}

class W4A4Act : public ::testing::TestWithParam<const char*> {};

TEST_P(W4A4Act, QuantizerIsBitIdenticalToTheFormatLibrary) {
  const std::string act = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(act + " seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const float sv = act == "nvfp4-razer-act" ? 5.0f : 0.0f;
  const int M = 10;
  for (const int K : {16 * 37, 16 * 600, 16 * 2500}) {  // 1, 4 and 16 blocks per thread; not 256-aligned
    SCOPED_TRACE("K " + std::to_string(K));
    const std::vector<uint16_t> xh = activation_rows(M, K, g);
    GpuBuffer<uint16_t> x(xh), xq(size_t(M) * K);
    GpuBuffer<float> rs(M);
    xq.poison();
    quantize_rows_nvfp4(x.get(), M, K, act, sv, xq.get(), rs.get(), nullptr);
    const std::vector<uint16_t> q = xq.host();
    const std::vector<float> scale = rs.host();
    std::vector<float> gs;
    const std::vector<float> want = cpu_fake_quant(xh, M, K, act, sv, &gs);
    int bad = 0;
    for (int m = 0; m < M; ++m) {
      EXPECT_EQ(scale[size_t(m)], gs[size_t(m)]) << "row " << m;
      for (int k = 0; k < K; ++k) {
        const size_t i = size_t(m) * K + k;
        const float got = half_to_float(q[i]) * scale[size_t(m)];
        if (std::memcmp(&got, &want[i], 4) != 0 && !(got == 0 && want[i] == 0) && bad++ < 3)
          ADD_FAILURE() << "row " << m << " k " << k << ": got " << got << ", want " << want[i];
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST_P(W4A4Act, GemmMatchesFloat64OnBothDequantizedOperands) {
  const std::string act = GetParam();
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 g(seed);
  const float sv = act == "nvfp4-razer-act" ? 5.0f : 0.0f;
  GemmWorkspace ws;
  for (const char* wf : {"nvfp4", "nvfp4-razer", "razer-fp4-g128", "int4-g128"}) {
    SCOPED_TRACE(act + " x " + wf + " seed " + std::to_string(seed));
    const int N = 136, K = 384;
    const PackedTensor t = random_packed(wf, N, K, seed);
    const std::vector<float> w = dequantize(t);
    GemmWeight dw = upload_gemm(t, wf);
    for (int M : {1, 7, 64, 300}) {
      const std::vector<uint16_t> xh = activation_rows(M, K, g);
      std::vector<float> gs;
      const std::vector<float> xa = cpu_fake_quant(xh, M, K, act, sv, &gs);
      GpuBuffer<uint16_t> x(xh), y(size_t(M) * N);
      y.poison();
      gemm_w4a4(x.get(), M, dw, act, sv, y.get(), ws, nullptr);
      const RefResult ref = reference_gemm(
          M, N, K, [&](int m, int k) { return double(xa[size_t(m) * K + k]); },
          [&](int n, int k) { return double(w[size_t(n) * K + k]); });
      const bool exact = std::string(wf).rfind("nvfp4", 0) == 0;
      std::string first;
      EXPECT_EQ(count_bad(y.host(), ref, (exact ? 0.0 : std::ldexp(1.0, -11)) + 1e-5, &first), 0)
          << "M " << M << ": " << first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ActFormats, W4A4Act, ::testing::Values("nvfp4", "nvfp4-razer-act"), FormatName());

TEST(W4A4Errors, RejectsOtherActivationFormatsAndShapes) {
  GpuBuffer<uint16_t> x(64), xq(64);
  GpuBuffer<float> rs(4);
  EXPECT_THROW(quantize_rows_nvfp4(x.get(), 4, 16, "mxfp4", 0, xq.get(), rs.get(), nullptr), Error);
  EXPECT_THROW(quantize_rows_nvfp4(x.get(), 2, 24, "nvfp4", 0, xq.get(), rs.get(), nullptr), Error);
}

}  // namespace

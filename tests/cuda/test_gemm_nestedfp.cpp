// NestedFP GEMMs: FP16 mode rebuilds the exact FP16 weights and matches cuBLAS on them; FP8 mode
// (activation quantization + e4m3 GEMM) matches float64 references of the quantized math.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_buffer.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/cublas_fp16.h"
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

PackedTensor planes(std::string_view format, const std::vector<float>& w, int N, int K) {
  return quantize(format, w.data(), N, K);
}

TEST(GemmNestedFp16, IdentityActivationsReturnTheExactWeights) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int N = 264, K = 192;  // X = I_K: Y = W^T, one nonzero term per output, so exact
  const std::vector<float> w = nested_eligible_weights(N, K, g);
  GemmWeight dw = upload_gemm(planes("nestedfp", w, N, K));
  std::vector<uint16_t> eye(size_t(K) * K, 0);
  for (int k = 0; k < K; ++k) eye[size_t(k) * K + k] = 0x3C00;
  GpuBuffer<uint16_t> x(eye), y(size_t(K) * N);
  y.poison();
  GemmWorkspace ws;
  gemm(x.get(), K, dw, y.get(), ws, nullptr);
  const std::vector<uint16_t> out = y.host();
  int bad = 0;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      const uint16_t want = float_to_half(w[size_t(n) * K + k]), got = out[size_t(k) * N + n];
      const bool zeros = (want & 0x7FFF) == 0 && (got & 0x7FFF) == 0;  // -0 * 1 + (+0) sums to +0
      if (got != want && !zeros && bad++ < 3) ADD_FAILURE() << "w[" << n << "," << k << "] " << want << " got " << got;
    }
  EXPECT_EQ(bad, 0);
}

// Below 32 rows (the mma.sync kernel): 24 one-hot rows per call select weight columns exactly; eight
// calls cover every k, so every position of the device K order is read back.
TEST(GemmNestedFp16, OneHotRowsReturnTheExactWeightsOnTheSmallMKernel) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int N = 136, K = 192, M = 24;
  const std::vector<float> w = nested_eligible_weights(N, K, g);
  GemmWeight dw = upload_gemm(planes("nestedfp", w, N, K));
  GemmWorkspace ws;
  int bad = 0;
  for (int round = 0; round < K / M; ++round) {
    std::vector<uint16_t> onehot(size_t(M) * K, 0);
    for (int m = 0; m < M; ++m) onehot[size_t(m) * K + round * M + m] = 0x3C00;
    GpuBuffer<uint16_t> x(onehot), y(size_t(M) * N);
    y.poison();
    gemm(x.get(), M, dw, y.get(), ws, nullptr);
    const std::vector<uint16_t> out = y.host();
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        const int k = round * M + m;
        const uint16_t want = float_to_half(w[size_t(n) * K + k]), got = out[size_t(m) * N + n];
        const bool zeros = (want & 0x7FFF) == 0 && (got & 0x7FFF) == 0;
        if (got != want && !zeros && bad++ < 3) ADD_FAILURE() << "w[" << n << "," << k << "] " << want << " got " << got;
      }
  }
  EXPECT_EQ(bad, 0);
}

// upload_gemm stores both planes in KOrder::nested: byte (n, k) at row n, nested_position(k), a
// permutation of each 64-k block.
TEST(GemmNestedFp16, UploadedPlanesAreInTheNestedKOrder) {
  std::vector<bool> seen(64, false);
  for (int k = 0; k < 64; ++k) {
    const int64_t p = nested_position(k);
    ASSERT_TRUE(p >= 0 && p < 64 && !seen[size_t(p)]) << "k " << k;
    seen[size_t(p)] = true;
  }
  EXPECT_EQ(nested_position(64 * 5 + 9), 64 * 5 + nested_position(9));
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int N = 16, K = 256;
  const PackedTensor t = planes("nestedfp", nested_eligible_weights(N, K, g), N, K);
  GemmWeight dw = upload_gemm(t);
  std::vector<uint8_t> up(t.qweight.size()), lo(t.aux.size());
  NIBBLE_CUDA_CHECK(cudaMemcpy(up.data(), dw.codes, up.size(), cudaMemcpyDeviceToHost));
  NIBBLE_CUDA_CHECK(cudaMemcpy(lo.data(), dw.meta, lo.size(), cudaMemcpyDeviceToHost));
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      const size_t src = size_t(n) * K + k, dst = size_t(n) * K + size_t(nested_position(k));
      ASSERT_EQ(up[dst], t.qweight[src]) << "upper (" << n << ", " << k << ")";
      ASSERT_EQ(lo[dst], t.aux[src]) << "lower (" << n << ", " << k << ")";
    }
}

TEST(GemmNestedFp16, MatchesCublasAndFloat64OnTheReconstructedWeights) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int N = 392, K = 640;
  const std::vector<float> w = nested_eligible_weights(N, K, g);
  const PackedTensor t = planes("nestedfp", w, N, K);
  std::vector<uint16_t> rebuilt(t.qweight.size());
  for (size_t i = 0; i < rebuilt.size(); ++i) rebuilt[i] = nestedfp::reconstruct(t.qweight[i], t.aux[i]);
  GemmWeight dw = upload_gemm(t);
  GpuBuffer<uint16_t> wd(rebuilt);
  CublasFp16 cublas;
  GemmWorkspace ws;
  for (int M : {1, 5, 64, 65, 200}) {
    for (int split : {0, 1, 3}) {
      SCOPED_TRACE("M " + std::to_string(M) + " split " + std::to_string(split));
      const std::vector<uint16_t> xh = random_halves(size_t(M) * K, g, 1.0f);
      GpuBuffer<uint16_t> x(xh), y(size_t(M) * N), yc(size_t(M) * N);
      y.poison();
      gemm(x.get(), M, dw, y.get(), ws, nullptr, GemmOptions{split});
      cublas.gemm(x.get(), wd.get(), yc.get(), M, N, K, nullptr);
      const RefResult ref = reference_gemm(
          M, N, K, [&](int m, int k) { return double(half_to_float(xh[size_t(m) * K + k])); },
          [&](int n, int k) { return double(half_to_float(rebuilt[size_t(n) * K + k])); });
      std::string first;
      EXPECT_EQ(count_bad(y.host(), ref, 1e-5, &first), 0) << first;
      // cuBLAS, too, must be within its own accumulation-order tolerance of the reference.
      EXPECT_EQ(count_bad(yc.host(), ref, 1e-5, &first), 0) << "cuBLAS: " << first;
    }
  }
}

TEST(GemmNestedFp8, QuantizeRowsMatchesTheBruteForceEncoder) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int M = 9, K = 1000;
  std::vector<uint16_t> xh = random_halves(size_t(M) * K, g, 1.0f);
  for (int k = 0; k < K; ++k) xh[size_t(3) * K + k] = 0;                          // all-zero row
  for (int k = 0; k < K; ++k) xh[size_t(5) * K + k] = float_to_half(half_to_float(xh[size_t(5) * K + k]) * 1e-4f);
  GpuBuffer<uint16_t> x(xh);
  GpuBuffer<uint8_t> x8(size_t(M) * K);
  GpuBuffer<float> rs(M);
  quantize_rows_e4m3(x.get(), M, K, x8.get(), rs.get(), nullptr);
  const std::vector<uint8_t> codes = x8.host();
  const std::vector<float> row_scale = rs.host();
  for (int m = 0; m < M; ++m) {
    float amax = 0;
    for (int k = 0; k < K; ++k) amax = std::max(amax, std::fabs(half_to_float(xh[size_t(m) * K + k])));
    const float sx = amax > 0 ? 448.0f / amax : 1.0f;
    EXPECT_EQ(row_scale[m], 1.0f / (256.0f * sx)) << "row " << m;
    int bad = 0;
    for (int k = 0; k < K; ++k) {
      const uint8_t want = e4m3_from_float(half_to_float(xh[size_t(m) * K + k]) * sx);
      const uint8_t got = codes[size_t(m) * K + k];
      const bool zeros = (want & 0x7F) == 0 && (got & 0x7F) == 0;
      if (want != got && !zeros && bad++ < 3) ADD_FAILURE() << "row " << m << " k " << k << ": " << int(got) << " vs " << int(want);
    }
  }
}

// Both quantizers in KOrder::nested write exactly the natural-order codes, moved to nested_position.
TEST(GemmNestedFp8, NestedOrderQuantizersPermuteTheNaturalCodes) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  for (int K : {64, 4096, 14336, 25600, 40000}) {  // the vector quantizer's 4, 8, 16 words per thread; two passes
    SCOPED_TRACE("K " + std::to_string(K));
    const int M = 5;
    GpuBuffer<uint16_t> x(random_halves(size_t(M) * K, g, 1.0f));
    GpuBuffer<uint8_t> nat(size_t(M) * K), a(size_t(M) * K), b(size_t(M) * K);
    GpuBuffer<float> rs(M), rsa(M), rsb(M);
    a.poison(), b.poison();
    quantize_rows_e4m3(x.get(), M, K, nat.get(), rs.get(), nullptr);
    quantize_rows_e4m3(x.get(), M, K, a.get(), rsa.get(), nullptr, KOrder::nested);
    quantize_rows_e4m3_vec(x.get(), M, K, b.get(), rsb.get(), nullptr, KOrder::nested);
    const std::vector<uint8_t> n8 = nat.host(), a8 = a.host(), b8 = b.host();
    EXPECT_EQ(a8, b8);
    EXPECT_EQ(rsa.host(), rs.host());
    EXPECT_EQ(rsb.host(), rs.host());
    int bad = 0;
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < K; ++k) {
        const size_t i = size_t(m) * K, want = n8[i + size_t(k)], got = a8[i + size_t(nested_position(k))];
        if (got != want && bad++ < 3) ADD_FAILURE() << "row " << m << " k " << k << ": " << got << " vs " << want;
      }
  }
  GpuBuffer<uint16_t> x(size_t(4) * 96);
  GpuBuffer<uint8_t> x8(size_t(4) * 96);
  GpuBuffer<float> rs(4);
  EXPECT_THROW(quantize_rows_e4m3(x.get(), 4, 96, x8.get(), rs.get(), nullptr, KOrder::nested), Error);  // K % 64
  EXPECT_THROW(quantize_rows_e4m3_vec(x.get(), 4, 96, x8.get(), rs.get(), nullptr, KOrder::nested), Error);
}

TEST(GemmNestedFp8, E4M3GemmMatchesFloat64) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int N = 264, K = 384;
  auto random_codes = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) {
      b = uint8_t(g());
      if ((b & 0x7F) == 0x7F) b ^= 1;  // no NaN
    }
    return v;
  };
  const std::vector<uint8_t> uh = random_codes(size_t(N) * K);
  GpuBuffer<uint8_t> u(uh);
  GemmWorkspace ws;
  for (int M : {1, 7, 64, 65, 200}) {
    for (int split : {0, 1, 4}) {
      SCOPED_TRACE("M " + std::to_string(M) + " split " + std::to_string(split));
      const std::vector<uint8_t> xh = random_codes(size_t(M) * K);
      std::vector<float> rsh(M);
      for (auto& r : rsh) r = std::ldexp(1.0f + float(g() % 1000) / 1000.0f, -20);
      GpuBuffer<uint8_t> x8(xh);
      GpuBuffer<float> rs(rsh);
      GpuBuffer<uint16_t> y(size_t(M) * N);
      y.poison();
      gemm_e4m3(x8.get(), rs.get(), M, u.get(), N, K, y.get(), ws, nullptr, GemmOptions{split});
      const RefResult ref = reference_gemm(
          M, N, K, [&](int m, int k) { return e4m3_to_double(xh[size_t(m) * K + k]) * rsh[m]; },
          [&](int n, int k) { return e4m3_to_double(uh[size_t(n) * K + k]); });
      std::string first;
      EXPECT_EQ(count_bad(y.host(), ref, 1e-5, &first), 0) << first;
    }
  }
}

TEST(GemmNestedFp8, GemmOnANestedfp8WeightEqualsItsTwoStages) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int M = 33, N = 128, K = 256;
  const std::vector<float> w = nested_eligible_weights(N, K, g);
  const PackedTensor t = planes("nestedfp8", w, N, K);
  GemmWeight dw = upload_gemm(t);
  const std::vector<uint16_t> xh = random_halves(size_t(M) * K, g, 2.0f);
  GpuBuffer<uint16_t> x(xh), y(size_t(M) * N), y2(size_t(M) * N);
  GpuBuffer<uint8_t> x8(size_t(M) * K);
  GpuBuffer<float> rs(M);
  GemmWorkspace ws;
  y.poison();
  gemm(x.get(), M, dw, y.get(), ws, nullptr);
  quantize_rows_e4m3(x.get(), M, K, x8.get(), rs.get(), nullptr, KOrder::nested);  // the order of dw's plane
  gemm_e4m3(x8.get(), rs.get(), M, static_cast<const uint8_t*>(dw.codes), N, K, y2.get(), ws, nullptr);
  EXPECT_EQ(y.host(), y2.host());
  // And the quantized product stays close to the FP16 product (FP8 mode is lossy: loose bound).
  const std::vector<uint16_t> out = y.host();
  double num = 0, den = 0;
  const RefResult ref = reference_gemm(
      M, N, K, [&](int m, int k) { return double(half_to_float(xh[size_t(m) * K + k])); },
      [&](int n, int k) { return double(w[size_t(n) * K + k]); });
  for (size_t i = 0; i < out.size(); ++i) num += std::pow(half_to_float(out[i]) - ref.y[i], 2), den += ref.y[i] * ref.y[i];
  EXPECT_LT(std::sqrt(num / den), 0.1);
}

// From 64 rows gemm() runs nestedfp8 through cuBLASLt: the same outputs as calling it directly.
TEST(GemmNestedFp8, GemmRoutesManyRowsToCublasLt) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int M = 200, N = 256, K = 512;
  const PackedTensor t = planes("nestedfp8", nested_eligible_weights(N, K, g), N, K);
  GemmWeight dw = upload_gemm(t);
  GpuBuffer<uint16_t> x(random_halves(size_t(M) * K, g, 2.0f)), y(size_t(M) * N), y2(size_t(M) * N);
  GemmWorkspace ws;
  y.poison(), y2.poison();
  gemm(x.get(), M, dw, y.get(), ws, nullptr);
  gemm_nestedfp8_cublaslt(x.get(), M, dw, y2.get(), ws, ws.cublaslt_fp8(), nullptr);
  EXPECT_EQ(y.host(), y2.host());
}

TEST(GemmNestedFp, RejectsBadShapesAndFormats) {
  std::vector<float> w(size_t(16) * 48, 0.01f);
  EXPECT_THROW(upload_gemm(quantize("nestedfp", w.data(), 16, 48)), Error);  // K not a multiple of 64
  std::vector<float> w2(size_t(16) * 192, 0.01f);
  EXPECT_THROW(upload_gemm(quantize("nestedfp8", w2.data(), 16, 192)), Error);  // K not a multiple of 128
  PackedTensor t = quantize("nestedfp", w2.data(), 16, 192);
  t.aux.pop_back();
  EXPECT_THROW(upload_gemm(t, "layer.w"), Error);
}

}  // namespace

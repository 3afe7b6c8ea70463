// NestedFP8 on cuBLASLt's FP8 tensor cores (gemm_nestedfp8_cublaslt, CublasLtFp8::gemm_row_scaled,
// quantize_rows_e4m3_vec): float64 references of (E4M3(x * sx) · U^T) / (256 sx) on fresh random
// data, the mma.sync path (gemm()) on the same inputs, and bad input. Hopper's FP8 tensor cores
// accumulate with fewer bits than FP32 between cuBLASLt's FP32 promotions (H100, 5 runs: up to
// 1.1e-3 x sum|terms|), so random data is checked at kTensorCoreTol, and the scaling,
// indexing and rounding bit-exactly on inputs whose sums no accumulator can round.
// With NIBBLE_NFP8_TIMING=1, GemmNestedFp8LtTiming prints cuBLAS FP16, cuBLASLt FP8 and this path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_buffer.h"
#include "nibble/cuda/bench.h"
#include "nibble/cuda/cublas_fp16.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/half.h"
#include "test_gemm_ref.h"

namespace {

using namespace nibble;
using namespace nibble::cuda;
using namespace nibble::cuda::test;
using RowScale = CublasLtFp8::RowScale;

// Tolerance per sum of |terms| for cuBLASLt FP8 on Hopper (about 7x the largest error seen).
constexpr double kTensorCoreTol = 8e-3;

const char* name_of(RowScale how) {
  return how == RowScale::kAuto ? "auto" : how == RowScale::kEpilogue ? "epilogue" : "separate pass";
}

// The paths to check: the epilogue only where this GPU / cuBLAS offers it (said once, not hidden).
std::vector<RowScale> paths(CublasLtFp8& lt, int M, int N, int K) {
  std::vector<RowScale> v{RowScale::kAuto, RowScale::kSeparatePass};
  if (lt.auto_row_scale(M, N, K) == RowScale::kEpilogue) {
    v.push_back(RowScale::kEpilogue);
  } else {
    static bool said = false;
    if (!said) std::printf("note: cuBLASLt offers no outer-vector-scaled FP8 algorithm here; auto = separate pass\n");
    said = true;
  }
  return v;
}

std::vector<uint8_t> random_e4m3(size_t n, std::mt19937_64& g) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    b = uint8_t(g());
    if ((b & 0x7F) == 0x7F) b ^= 1;  // no NaN
  }
  return v;
}

// Activations with edge rows: all zero, tiny (fp16 subnormals), one nonzero, +-`big` (the fp16
// extremes for the quantizer; smaller for GEMMs, whose fp16 outputs must not overflow).
std::vector<uint16_t> activations(int M, int K, std::mt19937_64& g, uint16_t big = 0x7BFF) {
  std::vector<uint16_t> x = random_halves(size_t(M) * K, g, 1.5f);
  auto row = [&](int m) { return x.begin() + size_t(m) * K; };
  if (M > 1) std::fill(row(1), row(1) + K, uint16_t(0));
  if (M > 2) std::transform(row(2), row(2) + K, row(2), [](uint16_t h) { return uint16_t(h & 0x83FF); });
  if (M > 3) std::fill(row(3), row(3) + K, uint16_t(0x8000)), x[size_t(3) * K + K / 2] = 0x3C00;
  if (M > 4) x[size_t(4) * K] = big, x[size_t(4) * K + 1] = uint16_t(big | 0x8000);
  return x;
}

// The CPU definition of the quantizer: sx = 448 / amax, codes by the brute-force encoder.
struct CpuQuant {
  std::vector<uint8_t> x8;
  std::vector<float> row_scale;
};
CpuQuant cpu_quantize(const std::vector<uint16_t>& x, int M, int K) {
  CpuQuant q{std::vector<uint8_t>(x.size()), std::vector<float>(M)};
  for (int m = 0; m < M; ++m) {
    float amax = 0;
    for (int k = 0; k < K; ++k) amax = std::max(amax, std::fabs(half_to_float(x[size_t(m) * K + k])));
    const float sx = amax > 0 ? 448.0f / amax : 1.0f;
    q.row_scale[m] = 1.0f / (256.0f * sx);
    for (int k = 0; k < K; ++k) q.x8[size_t(m) * K + k] = e4m3_from_float(half_to_float(x[size_t(m) * K + k]) * sx);
  }
  return q;
}

// Float64 y[m, n] = row_scale[m] * sum_k e4m3(x8[m, k]) e4m3(w8[n, k]).
RefResult reference(const std::vector<uint8_t>& x8, const std::vector<float>& row_scale, const std::vector<uint8_t>& w8,
                    int M, int N, int K) {
  std::vector<double> xd(x8.size()), wd(w8.size());
  for (size_t i = 0; i < xd.size(); ++i) xd[i] = e4m3_to_double(x8[i]) * row_scale[i / K];
  for (size_t i = 0; i < wd.size(); ++i) wd[i] = e4m3_to_double(w8[i]);
  return reference_gemm(M, N, K, [&](int m, int k) { return xd[size_t(m) * K + k]; },
                        [&](int n, int k) { return wd[size_t(n) * K + k]; });
}

TEST(GemmNestedFp8Lt, VectorQuantizerIsBitIdenticalToQuantizeRowsE4M3AndTheCpuEncoder) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  for (int K : {8, 520, 4096, 14336, 40000}) {  // register-resident rows of each size; 40000: two passes
    const int M = 37;
    SCOPED_TRACE("K " + std::to_string(K));
    const std::vector<uint16_t> xh = activations(M, K, g);
    GpuBuffer<uint16_t> x(xh);
    GpuBuffer<uint8_t> a8(xh.size()), b8(xh.size());
    GpuBuffer<float> ars(M), brs(M);
    a8.poison(), b8.poison();
    quantize_rows_e4m3(x.get(), M, K, a8.get(), ars.get(), nullptr);
    quantize_rows_e4m3_vec(x.get(), M, K, b8.get(), brs.get(), nullptr);
    const std::vector<uint8_t> got = b8.host();
    EXPECT_EQ(got, a8.host());
    EXPECT_EQ(brs.host(), ars.host());
    const CpuQuant want = cpu_quantize(xh, M, K);
    EXPECT_EQ(brs.host(), want.row_scale);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const bool zeros = (want.x8[i] & 0x7F) == 0 && (got[i] & 0x7F) == 0;  // the sign of a flushed tiny value
      if (got[i] != want.x8[i] && !zeros && bad++ < 3)
        ADD_FAILURE() << "element " << i << ": " << int(got[i]) << " vs CPU " << int(want.x8[i]);
    }
  }
}

// Codes 0, +-1 only: every partial sum is an integer below 2^11, exact in any accumulator, so the
// output must be fp16_rn(float(sum) * row_scale[m]) bit for bit, whatever the algorithm.
TEST(GemmNestedFp8Lt, ExactlyAccumulableInputsGiveTheBitExactScaledResult) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const uint8_t codes[] = {0x00, 0x80, 0x38, 0xB8, 0x38, 0xB8};  // +-0, +-1 (1 twice as likely)
  auto draw = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = codes[g() % 6];
    return v;
  };
  GemmWorkspace ws;
  for (bool tune : {true, false}) {
    CublasLtFp8 lt;
    lt.set_autotune(tune);
    for (auto [K, N] : {std::pair{128, 72}, std::pair{1040, 136}}) {
      const std::vector<uint8_t> wh = draw(size_t(N) * K);
      GpuBuffer<uint8_t> w(wh);
      for (int M : {1, 7, 64, 300, 512}) {
        const std::vector<uint8_t> xh = draw(size_t(M) * K);
        std::vector<float> rsh(M);
        for (auto& r : rsh) r = std::ldexp(1.0f + float(g() % 4096) / 4096.0f, -int(8 + g() % 18));
        std::vector<uint16_t> want(size_t(M) * N);
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) {
            int sum = 0;
            for (int k = 0; k < K; ++k)
              sum += int(e4m3_to_double(xh[size_t(m) * K + k]) * e4m3_to_double(wh[size_t(n) * K + k]));
            want[size_t(m) * N + n] = float_to_half(float(sum) * rsh[m]);
          }
        GpuBuffer<uint8_t> x8(xh);
        GpuBuffer<float> rs(rsh);
        GpuBuffer<uint16_t> y(size_t(M) * N);
        for (RowScale how : paths(lt, M, N, K)) {
          SCOPED_TRACE("K " + std::to_string(K) + " N " + std::to_string(N) + " M " + std::to_string(M) + " " +
                       name_of(how) + (tune ? " tuned" : " heuristic"));
          y.poison();
          lt.gemm_row_scaled(x8.get(), rs.get(), w.get(), y.get(), M, N, K, ws, nullptr, how);
          const std::vector<uint16_t> got = y.host();
          int bad = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const bool zeros = (got[i] & 0x7FFF) == 0 && (want[i] & 0x7FFF) == 0;
            if (got[i] != want[i] && !zeros && bad++ < 3)
              ADD_FAILURE() << "index " << i << ": " << got[i] << " vs " << want[i];
          }
        }
      }
    }
  }
}

// The largest accumulation error seen, beyond the fp16 output rounding, per sum of |terms|.
double accumulation_error(const std::vector<uint16_t>& y, const RefResult& ref) {
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double excess = std::fabs(half_to_float(y[i]) - ref.y[i]) - std::ldexp(std::fabs(ref.y[i]), -11) - 6e-8;
    if (ref.abs_sum[i] > 0) worst = std::max(worst, excess / ref.abs_sum[i]);
  }
  return worst;
}

TEST(GemmNestedFp8Lt, RowScaledGemmMatchesFloat64) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  CublasLtFp8 lt;
  GemmWorkspace ws;
  double worst[3] = {0, 0, 0};
  struct Shape {
    int K, N;
  };
  for (Shape s : {Shape{128, 72}, Shape{384, 264}, Shape{1040, 136}}) {  // 1040: K a multiple of 16 only
    const std::vector<uint8_t> wh = random_e4m3(size_t(s.N) * s.K, g);
    GpuBuffer<uint8_t> w(wh);
    for (int M : {1, 7, 64, 300, 512}) {
      const std::vector<uint8_t> xh = random_e4m3(size_t(M) * s.K, g);
      std::vector<float> rsh(M);
      for (auto& r : rsh) r = std::ldexp(1.0f + float(g() % 4096) / 4096.0f, -int(13 + g() % 12));  // no fp16 overflow
      const RefResult ref = reference(xh, rsh, wh, M, s.N, s.K);
      GpuBuffer<uint8_t> x8(xh);
      GpuBuffer<float> rs(rsh);
      GpuBuffer<uint16_t> y(size_t(M) * s.N);
      for (RowScale how : paths(lt, M, s.N, s.K)) {
        SCOPED_TRACE("K " + std::to_string(s.K) + " N " + std::to_string(s.N) + " M " + std::to_string(M) + " " +
                     name_of(how));
        y.poison();
        lt.gemm_row_scaled(x8.get(), rs.get(), w.get(), y.get(), M, s.N, s.K, ws, nullptr, how);
        std::string first;
        const std::vector<uint16_t> out = y.host();
        EXPECT_EQ(count_bad(out, ref, kTensorCoreTol, &first), 0) << first;
        worst[int(how)] = std::max(worst[int(how)], accumulation_error(out, ref));
      }
    }
  }
  std::printf("largest accumulation error / sum|terms|: auto %.2g, epilogue %.2g, separate pass %.2g\n", worst[0],
              worst[1], worst[2]);
}

// A NestedFP weight (either mode) with the format's edge values mixed in.
PackedTensor nested_weight(std::string_view format, int N, int K, std::mt19937_64& g) {
  const std::vector<float> w = nested_eligible_weights(N, K, g);
  return quantize(format, w.data(), N, K);
}

// |a - b| within both paths' tolerances of the reference, summed.
int count_apart(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const RefResult& ref) {
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = (kTensorCoreTol + 1e-5) * ref.abs_sum[i] + 2 * (std::ldexp(std::fabs(ref.y[i]), -10) + 1e-7);
    bad += !(std::fabs(double(half_to_float(a[i])) - half_to_float(b[i])) <= tol);
  }
  return bad;
}

TEST(GemmNestedFp8Lt, MatchesTheTwoStageDefinitionAndTheMmaPath) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  CublasLtFp8 lt;
  GemmWorkspace ws;
  double worst = 0;
  struct Shape {
    int K, N;
  };
  for (Shape s : {Shape{256, 136}, Shape{640, 264}}) {
    const PackedTensor t = nested_weight("nestedfp8", s.N, s.K, g);
    const GemmWeight w = upload_gemm(t);
    for (int M : {1, 7, 64, 300, 512}) {
      const std::vector<uint16_t> xh = activations(M, s.K, g, 0x63FF);  // +-1023.5
      const CpuQuant q = cpu_quantize(xh, M, s.K);
      const RefResult ref = reference(q.x8, q.row_scale, t.qweight, M, s.N, s.K);
      GpuBuffer<uint16_t> x(xh), y(size_t(M) * s.N), y_mma(size_t(M) * s.N);
      y_mma.poison();
      {  // the FP32-exact mma.sync path (gemm() itself takes cuBLASLt from 64 rows)
        GpuBuffer<uint8_t> x8(size_t(M) * s.K);
        GpuBuffer<float> rs(static_cast<size_t>(M));
        quantize_rows_e4m3(x.get(), M, s.K, x8.get(), rs.get(), nullptr, KOrder::nested);  // w.codes' order
        gemm_e4m3(x8.get(), rs.get(), M, static_cast<const uint8_t*>(w.codes), s.N, s.K, y_mma.get(), ws, nullptr);
      }
      const std::vector<uint16_t> mma = y_mma.host();
      for (RowScale how : paths(lt, M, s.N, s.K)) {
        SCOPED_TRACE("K " + std::to_string(s.K) + " N " + std::to_string(s.N) + " M " + std::to_string(M) + " " +
                     name_of(how));
        y.poison();
        gemm_nestedfp8_cublaslt(x.get(), M, w, y.get(), ws, lt, nullptr, how);
        const std::vector<uint16_t> out = y.host();
        std::string first;
        EXPECT_EQ(count_bad(out, ref, kTensorCoreTol, &first), 0) << first;
        EXPECT_EQ(count_bad(mma, ref, 1e-5, &first), 0) << "mma path: " << first;
        worst = std::max(worst, accumulation_error(out, ref));
        EXPECT_EQ(count_apart(out, mma, ref), 0);
        for (int n = 0; n < s.N && M > 1; ++n) EXPECT_EQ(half_to_float(out[size_t(s.N) + n]), 0.0f) << "zero row";
      }
    }
  }
  std::printf("largest accumulation error / sum|terms| on NestedFP8 weights: %.2g\n", worst);
}

TEST(GemmNestedFp8Lt, ANestedfpWeightRunsTheSameFp8Product) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int M = 45, N = 200, K = 384;
  PackedTensor t = nested_weight("nestedfp", N, K, g);
  const GemmWeight w16 = upload_gemm(t);
  t.format = "nestedfp8";  // the same two planes
  const GemmWeight w8 = upload_gemm(t);
  const std::vector<uint16_t> xh = activations(M, K, g, 0x63FF);
  GpuBuffer<uint16_t> x(xh), a(size_t(M) * N), b(size_t(M) * N);
  GemmWorkspace ws;
  a.poison(), b.poison();
  gemm_nestedfp8_cublaslt(x.get(), M, w16, a.get(), ws, ws.cublaslt_fp8(), nullptr);
  gemm_nestedfp8_cublaslt(x.get(), M, w8, b.get(), ws, ws.cublaslt_fp8(), nullptr);
  EXPECT_EQ(a.host(), b.host());
}

TEST(GemmNestedFp8Lt, RejectsBadInput) {
  GemmWorkspace ws;
  CublasLtFp8& lt = ws.cublaslt_fp8();
  GpuBuffer<uint16_t> x(size_t(64) * 256 + 8), y(size_t(64) * 256);
  GpuBuffer<uint8_t> x8(size_t(64) * 256), w8(size_t(64) * 256);
  GpuBuffer<float> rs(64);
  std::vector<float> wf(size_t(16) * 256, 0.01f);
  const GemmWeight nv = upload_gemm(quantize("nvfp4", wf.data(), 16, 256));
  EXPECT_THROW(gemm_nestedfp8_cublaslt(x.get(), 4, nv, y.get(), ws, lt, nullptr), Error);  // not NestedFP
  const GemmWeight empty;
  EXPECT_THROW(gemm_nestedfp8_cublaslt(x.get(), 4, empty, y.get(), ws, lt, nullptr), Error);
  const GemmWeight nested = upload_gemm(quantize("nestedfp8", wf.data(), 16, 256));
  EXPECT_THROW(gemm_nestedfp8_cublaslt(x.get(), 0, nested, y.get(), ws, lt, nullptr), Error);  // M = 0
  EXPECT_THROW(lt.gemm_row_scaled(x8.get(), rs.get(), w8.get(), y.get(), 4, 64, 24, ws, nullptr), Error);  // K % 16
  EXPECT_THROW(lt.gemm_row_scaled(x8.get(), rs.get(), w8.get(), y.get(), 4, 12, 64, ws, nullptr), Error);  // N % 8
  EXPECT_THROW(lt.gemm_row_scaled(x8.get(), nullptr, w8.get(), y.get(), 4, 64, 64, ws, nullptr), Error);
  EXPECT_THROW(lt.gemm(x8.get(), w8.get(), y.get(), 4, 64, 40, 1.0f, nullptr), Error);
  EXPECT_THROW(quantize_rows_e4m3_vec(x.get(), 4, 12, x8.get(), rs.get(), nullptr), Error);      // K % 8
  EXPECT_THROW(quantize_rows_e4m3_vec(x.get() + 1, 4, 64, x8.get(), rs.get(), nullptr), Error);  // misaligned
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- timing mode (NIBBLE_NFP8_TIMING=1): not a test, a side-by-side table --------------------

struct TimingShape {
  const char* proj;
  int K, N;
};

double time_us(const std::function<void(int, cudaStream_t)>& f, int copies, cudaStream_t st) {
  return time_rotated_us(f, copies, st, 24, 15);
}

void time_shape(const TimingShape& s, cudaStream_t st, CublasFp16& blas, GemmWorkspace& ws) {
  std::mt19937_64 g(std::random_device{}());
  const int maxM = 2048;
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<uint16_t> w16h(size_t(s.N) * s.K);
  std::vector<float> w16f(w16h.size());
  for (size_t i = 0; i < w16h.size(); ++i) w16h[i] = float_to_half(d(g)), w16f[i] = half_to_float(w16h[i]);
  const PackedTensor t = quantize("nestedfp8", w16f.data(), s.N, s.K);  // fp16 values: split exactly
  const int copies16 = rotation_copies(w16h.size() * 2), copies8 = rotation_copies(w16h.size());
  std::vector<std::unique_ptr<GpuBuffer<uint16_t>>> w16;
  for (int c = 0; c < copies16; ++c) w16.push_back(std::make_unique<GpuBuffer<uint16_t>>(w16h));
  std::vector<GemmWeight> w8;
  for (int c = 0; c < copies8; ++c) w8.push_back(upload_gemm(t));
  GpuBuffer<uint16_t> x(random_halves(size_t(maxM) * s.K, g, 1.0f)), y(size_t(maxM) * s.N);
  GpuBuffer<uint8_t> x8(size_t(maxM) * s.K);
  GpuBuffer<float> rs(maxM);
  quantize_rows_e4m3(x.get(), maxM, s.K, x8.get(), rs.get(), st);
  CublasLtFp8& lt = ws.cublaslt_fp8();  // autotuned (the default)
  CublasLtFp8 top1;                      // the heuristic's first choice
  top1.set_autotune(false);
  auto u8 = [&](int c) { return static_cast<const uint8_t*>(w8[size_t(c)].codes); };
  for (int M : {128, 512, 2048}) {
    const double fp16 = time_us([&](int c, cudaStream_t q) { blas.gemm(x.get(), w16[size_t(c)]->get(), y.get(), M, s.N, s.K, q); }, copies16, st);
    auto plain = [&](CublasLtFp8& l) {
      return time_us([&](int c, cudaStream_t q) { l.gemm(x8.get(), u8(c), y.get(), M, s.N, s.K, 1.0f, q); }, copies8, st);
    };
    const double lt_tuned = plain(lt), lt_top1 = plain(top1);
    const double mma = time_us([&](int c, cudaStream_t q) {  // the mma.sync e4m3 path (gemm() takes cuBLASLt here)
      quantize_rows_e4m3(x.get(), M, s.K, x8.get(), rs.get(), q, KOrder::nested);
      gemm_e4m3(x8.get(), rs.get(), M, u8(c), s.N, s.K, y.get(), ws, q);
    }, copies8, st);
    auto ours = [&](CublasLtFp8& l, RowScale how) {
      return time_us([&](int c, cudaStream_t q) { gemm_nestedfp8_cublaslt(x.get(), M, w8[size_t(c)], y.get(), ws, l, q, how); }, copies8, st);
    };
    const bool epi = lt.auto_row_scale(M, s.N, s.K) == RowScale::kEpilogue;
    const double ours_tuned = ours(lt, RowScale::kAuto), ours_top1 = ours(top1, RowScale::kAuto);
    const double sep = ours(lt, RowScale::kSeparatePass);
    const double gemm_only = time_us([&](int c, cudaStream_t q) { lt.gemm_row_scaled(x8.get(), rs.get(), u8(c), y.get(), M, s.N, s.K, ws, q); }, copies8, st);
    const double q_old = time_us([&](int, cudaStream_t q) { quantize_rows_e4m3(x.get(), M, s.K, x8.get(), rs.get(), q, KOrder::nested); }, 1, st);
    const double q_vec = time_us([&](int, cudaStream_t q) { quantize_rows_e4m3_vec(x.get(), M, s.K, x8.get(), rs.get(), q, KOrder::nested); }, 1, st);
    std::printf("| %-7s | %4d | %7.1f | %7.1f | %7.1f | %7.1f | %7.1f | %7.1f | %7.1f | %7.1f | %5.1f | %5.1f | %s | %5.2fx | %5.2fx | %5.2fx |\n",
                s.proj, M, fp16, lt_tuned, lt_top1, mma, ours_tuned, ours_top1, sep, gemm_only, q_old, q_vec,
                epi ? "epilogue" : "sep.pass", fp16 / ours_tuned, lt_tuned / ours_tuned, lt_top1 / ours_tuned);
  }
}

TEST(GemmNestedFp8LtTiming, CublasFp16VsCublasLtFp8VsNestedFp8) {
  if (!std::getenv("NIBBLE_NFP8_TIMING")) GTEST_SKIP() << "set NIBBLE_NFP8_TIMING=1 for the timing table";
  cudaStream_t st;
  NIBBLE_CUDA_CHECK(cudaStreamCreate(&st));
  CublasFp16 blas;
  GemmWorkspace ws;
  std::printf("%s, Llama-3.1-8B, median us per call (CUDA graph, weights rotated past the L2)\n", device_info().name.c_str());
  std::printf("| proj | M | fp16 cuBLAS | lt fp8 tuned | lt fp8 top-1 | mma nestedfp8 | ours tuned | ours top-1 | ours sep. pass | ours GEMM only | quant old | quant vec | auto path | ours vs fp16 | vs lt tuned | vs lt top-1 |\n");
  for (const TimingShape& s : {TimingShape{"qkv", 4096, 6144}, TimingShape{"gate_up", 4096, 28672}}) time_shape(s, st, blas, ws);
  NIBBLE_CUDA_CHECK(cudaStreamDestroy(st));
}

}  // namespace

// GPU element-wise ops and RMSNorm vs float64 references on fresh random data; outputs poisoned
// (NaN) before each run. Tolerance for FP16 outputs: 2^-10 relative (one fp16 ulp: the GPU's FP32
// value may round to the other neighbour) + 1e-7 absolute (fp16 subnormal spacing).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "nibble/cuda/ops.h"
#include "nibble/error.h"
#include "ops_test_util.h"

namespace nibble::cuda::test {
namespace {

namespace ops = nibble::cuda::ops;
constexpr double kHalfRel = 1.0 / 1024, kHalfAbs = 1e-7;

using OpsElementwise = SeededTest;

TEST_F(OpsElementwise, EmbedCopiesRowsExactly) {
  for (auto [T, H, V] : {std::tuple{1, 1, 3}, {7, 33, 50}, {37, 4097, 11}}) {
    const auto table = random_half(size_t(V) * H);
    std::vector<int32_t> ids(static_cast<size_t>(T));
    for (auto& i : ids) i = uniform_int(0, V - 1);
    ids[0] = V - 1;
    GpuBuffer<uint16_t> dt(table);
    GpuBuffer<int32_t> di(ids);
    GpuBuffer<float> x(size_t(T) * H);
    x.poison();
    ops::embed(dt.get(), di.get(), T, H, x.get(), nullptr);
    const auto got = x.host();
    int bad = 0;
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < H; ++i)
        bad += got[size_t(t) * H + i] != half_to_float(table[size_t(ids[size_t(t)]) * H + i]);
    EXPECT_EQ(bad, 0) << "T=" << T << " H=" << H;
  }
}

TEST_F(OpsElementwise, HalfToFloatAllPatterns) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
  GpuBuffer<uint16_t> dx(all);
  GpuBuffer<float> y(all.size());
  y.poison();
  ops::half_to_float(dx.get(), int64_t(all.size()), y.get(), nullptr);
  const auto got = y.host();
  int bad = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = half_to_float(all[i]);
    bad += std::isnan(want) ? !std::isnan(got[i]) : std::memcmp(&want, &got[i], 4) != 0;
  }
  EXPECT_EQ(bad, 0);
}

TEST_F(OpsElementwise, AddBias) {
  for (auto [T, N] : {std::pair{1, 1}, {3, 129}, {37, 1000}}) {
    const auto y0 = random_half(size_t(T) * N, 4.0f);
    const auto bias = random_float(size_t(N));
    GpuBuffer<uint16_t> y(y0);
    GpuBuffer<float> db(bias);
    ops::add_bias(y.get(), db.get(), T, N, nullptr);
    const auto got = y.host();
    CloseCheck check("add_bias T=" + std::to_string(T) + " N=" + std::to_string(N));
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) {
        const size_t i = size_t(t) * N + n;
        const double ref = h2d(y0[i]) + bias[size_t(n)];
        check(h2d(got[i]), ref, kHalfRel * std::fabs(ref) + kHalfAbs, std::to_string(i));
      }
  }
}

TEST_F(OpsElementwise, SiluMulIncludingInPlace) {
  for (int64_t n : {1, 255, 10007}) {
    auto gate = random_half(size_t(n), 3.0f);
    const auto up = random_half(size_t(n), 2.0f);
    gate[0] = float_to_half(-60000.0f);  // exp overflows: silu -> -0
    if (n > 1) gate[1] = float_to_half(0.0f);
    GpuBuffer<uint16_t> dg(gate), du(up), out(static_cast<size_t>(n));
    out.poison();
    ops::silu_mul(dg.get(), du.get(), n, out.get(), nullptr);
    ops::silu_mul(dg.get(), du.get(), n, dg.get(), nullptr);  // out aliasing gate
    const auto got = out.host(), got_inplace = dg.host();
    CloseCheck check("silu_mul n=" + std::to_string(n));
    for (size_t i = 0; i < size_t(n); ++i) {
      const double g = h2d(gate[i]), ref = g / (1 + std::exp(-g)) * h2d(up[i]);
      check(h2d(got[i]), ref, kHalfRel * std::fabs(ref) + kHalfAbs, std::to_string(i));
      EXPECT_EQ(got[i], got_inplace[i]) << i;
    }
  }
}

// The interleaved gate/up form equals silu_mul on the de-interleaved gate and up, bit for bit.
TEST_F(OpsElementwise, SiluMulPairsEqualsSiluMulOnTheSplitPairs) {
  for (auto [T, I] : {std::pair{1, 7}, {3, 1000}, {5, 33}}) {
    const auto gu = random_half(size_t(T) * 2 * I, 3.0f);
    std::vector<uint16_t> gate(size_t(T) * I), up(size_t(T) * I);
    for (size_t j = 0; j < gate.size(); ++j) gate[j] = gu[2 * j], up[j] = gu[2 * j + 1];
    GpuBuffer<uint16_t> dgu(gu), dg(gate), du(up), out(size_t(T) * I), want(size_t(T) * I);
    out.poison(), want.poison();
    ops::silu_mul_pairs(dgu.get(), T, I, out.get(), nullptr);
    ops::silu_mul(dg.get(), du.get(), int64_t(T) * I, want.get(), nullptr);
    const auto got = out.host(), w = want.host();
    for (size_t j = 0; j < w.size(); ++j) ASSERT_EQ(got[j], w[j]) << "T " << T << " I " << I << " element " << j;
  }
}

TEST_F(OpsElementwise, SplitColumnsCopiesEachPart) {
  for (auto [T, n0, n1, n2] : {std::tuple{1, 8, 3, 5}, {4, 64, 16, 16}, {3, 5, 9, 0}}) {
    const auto src = random_half(size_t(T) * (n0 + n1 + n2), 1.0f);
    GpuBuffer<uint16_t> ds(src), d0(size_t(T) * n0), d1(size_t(T) * n1), d2(size_t(T) * std::max(n2, 1));
    d0.poison(), d1.poison(), d2.poison();
    ops::split_columns(ds.get(), T, n0, n1, n2, d0.get(), d1.get(), n2 ? d2.get() : nullptr, nullptr);
    const auto g0 = d0.host(), g1 = d1.host(), g2 = d2.host();
    const int N = n0 + n1 + n2;
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < N; ++c) {
        const uint16_t want = src[size_t(t) * N + c];
        const uint16_t got = c < n0 ? g0[size_t(t) * n0 + c] : c < n0 + n1 ? g1[size_t(t) * n1 + c - n0]
                                                                       : g2[size_t(t) * n2 + c - n0 - n1];
        ASSERT_EQ(got, want) << "T " << T << " t " << t << " column " << c;
      }
  }
  GpuBuffer<uint16_t> h(8);
  EXPECT_THROW(ops::split_columns(h.get(), 1, 4, 2, 2, h.get(), h.get(), nullptr, nullptr), Error);  // d2 missing
}

// float64 RMSNorm of one row.
std::vector<double> ref_rmsnorm(const float* x, const float* w, int H, double eps) {
  double ss = 0;
  for (int i = 0; i < H; ++i) ss += double(x[i]) * x[i];
  const double r = 1 / std::sqrt(ss / H + eps);
  std::vector<double> y(static_cast<size_t>(H));
  for (int i = 0; i < H; ++i) y[size_t(i)] = double(w[i]) * x[i] * r;
  return y;
}

// got [T, H] (fp16) against ref_rmsnorm of each row of x, within fp16 rounding.
void check_norm_rows(const std::string& what, const std::vector<uint16_t>& got, const std::vector<float>& x,
                     const std::vector<float>& w, int T, int H, double eps) {
  CloseCheck check(what + " T=" + std::to_string(T) + " H=" + std::to_string(H));
  for (int t = 0; t < T; ++t) {
    const auto ref = ref_rmsnorm(&x[size_t(t) * H], w.data(), H, eps);
    for (int i = 0; i < H; ++i)
      check(h2d(got[size_t(t) * H + i]), ref[size_t(i)], kHalfRel * std::fabs(ref[size_t(i)]) + kHalfAbs,
            "t=" + std::to_string(t) + " i=" + std::to_string(i));
  }
}

TEST_F(OpsElementwise, RmsNormOddSizesAndZeroRow) {
  for (auto [T, H] : {std::pair{1, 1}, {7, 33}, {37, 1000}, {3, 4097}}) {
    auto x = random_float(size_t(T) * H, 3.0f);
    for (int i = 0; i < H; ++i) x[size_t(i)] = 0;  // row 0: zeros (eps keeps it finite)
    const auto w = random_float(size_t(H));
    const float eps = 1e-5f;
    GpuBuffer<float> dx(x), dw(w);
    GpuBuffer<uint16_t> y(size_t(T) * H);
    y.poison();
    ops::rmsnorm(dx.get(), dw.get(), T, H, eps, y.get(), nullptr);
    const auto got = y.host();
    check_norm_rows("rmsnorm", got, x, w, T, H, eps);
    EXPECT_EQ(dx.host(), x);  // the input stays as it was
  }
}

TEST_F(OpsElementwise, AddRmsNormUpdatesResidualAndNorms) {
  for (auto [T, H] : {std::pair{1, 64}, {7, 33}, {37, 2000}}) {
    const auto x0 = random_float(size_t(T) * H, 2.0f);
    const auto delta = random_half(size_t(T) * H);
    const auto w = random_float(size_t(H));
    std::vector<float> x1(x0.size());
    for (size_t i = 0; i < x0.size(); ++i) x1[i] = x0[i] + half_to_float(delta[i]);  // one FP32 add
    GpuBuffer<float> dx(x0), dw(w), dx2(x0);
    GpuBuffer<uint16_t> dd(delta), y(size_t(T) * H);
    y.poison();
    ops::add_rmsnorm(dx.get(), dd.get(), dw.get(), T, H, 1e-6f, y.get(), nullptr);
    ops::add_rmsnorm(dx2.get(), dd.get(), nullptr, T, H, 1e-6f, nullptr, nullptr);  // add only
    EXPECT_EQ(dx.host(), x1);
    EXPECT_EQ(dx2.host(), x1);
    const auto got = y.host();
    check_norm_rows("add_rmsnorm", got, x1, w, T, H, 1e-6);
  }
}

// The two-delta add (x = (x + d1) + d2, the order of two add_rmsnorm calls) and the norm of a sum
// that leaves x alone (rmsnorm_of_sum: add_rmsnorm's y, same bits).
TEST_F(OpsElementwise, TwoDeltasAndNormOfSum) {
  for (auto [T, H] : {std::pair{1, 4096}, {3, 33}, {2, 1100}, {1, 5000}}) {
    const auto x0 = random_float(size_t(T) * H, 2.0f);
    const auto d1 = random_half(size_t(T) * H), d2 = random_half(size_t(T) * H);
    const auto w = random_float(size_t(H));
    std::vector<float> x2(x0.size());
    for (size_t i = 0; i < x0.size(); ++i) x2[i] = (x0[i] + half_to_float(d1[i])) + half_to_float(d2[i]);
    GpuBuffer<float> dx(x0), dw(w), dxs(x0), dxo(x0);
    GpuBuffer<uint16_t> dd1(d1), dd2(d2), y(size_t(T) * H), ys(size_t(T) * H), yo(size_t(T) * H);
    y.poison(), ys.poison(), yo.poison();
    ops::add_rmsnorm(dx.get(), dd1.get(), dw.get(), T, H, 1e-6f, y.get(), nullptr, dd2.get());
    ops::add_rmsnorm(dxs.get(), dd1.get(), nullptr, T, H, 1e-6f, nullptr, nullptr);  // the same in two calls
    ops::add_rmsnorm(dxs.get(), dd2.get(), dw.get(), T, H, 1e-6f, ys.get(), nullptr);
    EXPECT_EQ(dx.host(), x2);
    EXPECT_EQ(dxs.host(), x2);
    EXPECT_EQ(y.host(), ys.host());
    const auto got = y.host();
    check_norm_rows("add_rmsnorm two deltas", got, x2, w, T, H, 1e-6);
    // rmsnorm_of_sum: x0 + d1 normed, x0 unchanged, the bits of add_rmsnorm's y
    GpuBuffer<float> dxa(x0);
    GpuBuffer<uint16_t> ya(size_t(T) * H);
    ops::rmsnorm_of_sum(dxo.get(), dd1.get(), dw.get(), T, H, 1e-6f, yo.get(), nullptr);
    ops::add_rmsnorm(dxa.get(), dd1.get(), dw.get(), T, H, 1e-6f, ya.get(), nullptr);
    EXPECT_EQ(dxo.host(), x0);
    EXPECT_EQ(yo.host(), ya.host());
  }
  GpuBuffer<float> f(16);
  GpuBuffer<uint16_t> h(16);
  EXPECT_THROW(ops::rmsnorm_of_sum(f.get(), nullptr, f.get(), 1, 4, 1e-5f, h.get(), nullptr), Error);
  EXPECT_THROW(ops::rmsnorm_of_sum(f.get(), h.get(), f.get(), 1, 4, 1e-5f, nullptr, nullptr), Error);
}

TEST(OpsArgs, BadShapesAndNullPointersThrow) {
  GpuBuffer<float> f(16);
  GpuBuffer<uint16_t> h(16);
  EXPECT_THROW(ops::rmsnorm(f.get(), f.get(), 1, 0, 1e-5f, h.get(), nullptr), Error);
  EXPECT_THROW(ops::rmsnorm(nullptr, f.get(), 1, 4, 1e-5f, h.get(), nullptr), Error);
  EXPECT_THROW(ops::add_rmsnorm(f.get(), h.get(), nullptr, 1, 4, 1e-5f, h.get(), nullptr), Error);
  EXPECT_THROW(ops::silu_mul(h.get(), h.get(), -1, h.get(), nullptr), Error);
  EXPECT_THROW(ops::add_bias(h.get(), nullptr, 2, 4, nullptr), Error);
  EXPECT_THROW(ops::embed(h.get(), nullptr, 1, 4, f.get(), nullptr), Error);
  EXPECT_NO_THROW(ops::rmsnorm(nullptr, nullptr, 0, 4, 1e-5f, nullptr, nullptr));  // T = 0: nothing to do
}

}  // namespace
}  // namespace nibble::cuda::test

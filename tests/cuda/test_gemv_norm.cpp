// linear_rmsnorm: the add + RMSNorm computed inside the one-row GEMV gives the bits of
// ops::rmsnorm_of_sum followed by linear(), for the gate/up silu pair and a plain weight, at row
// lengths that exercise every shape of the norm's summation order (rmsnorm_row.cuh); the residual
// is not written. Where the GEMV does not fuse (formats without kNormFused, more rows, long rows)
// the norm lands in the scratch and the result is the same.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda/format_name.h"
#include "cuda/gpu_buffer.h"
#include "nibble/cuda/linear.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/half.h"

namespace nibble::cuda {
namespace {

using test::GpuBuffer;

PackedTensor random_weight(const std::string& format, int64_t N, int64_t K, std::mt19937_64& g) {
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> w(size_t(N * K));
  for (float& v : w) v = d(g);
  return quantize(format, w.data(), N, K);
}

template <class T, class D>
std::vector<T> draw(size_t n, D dist, std::mt19937_64& g) {
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_same_v<T, uint16_t>) x = float_to_half(dist(g));
    else x = dist(g);
  }
  return v;
}

std::string fmt_case(int M, bool pair, int k_splits) {
  return "M " + std::to_string(M) + (pair ? " silu pair" : " plain") + (k_splits ? " k_splits 1" : " default");
}

class GemvNorm : public ::testing::TestWithParam<std::string> {};

TEST_P(GemvNorm, EqualsNormThenLinear) {
  const std::string format = GetParam();
  const bool fusing_format = format == "mxfp4" || format == "int4-g128";
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  // 640 and 768: fewer than 1024 virtual threads; 1152 and 2176: 1024 of them, uneven per thread;
  // 4096: the most the GEMV holds; 8192: beyond it (not fused)
  for (int64_t K : {640, 768, 1152, 2176, 4096, 8192}) {
    SCOPED_TRACE("K " + std::to_string(K));
    const int64_t I = 200;  // gate/up rows each: the persistent grid walks 400 rows
    const DeviceWeight pair =
        upload_silu_pair(random_weight(format, I, K, g), random_weight(format, I, K, g), "gate_up");
    const DeviceWeight plain = upload(random_weight(format, 96, K, g), "plain");
    for (int M : {1, 3}) {
      const size_t n = size_t(M) * size_t(K);
      const auto res = draw<float>(n, std::normal_distribution<float>(0.0f, 4.0f), g);
      const auto delta = draw<uint16_t>(n, std::normal_distribution<float>(0.0f, 1.0f), g);
      const auto w = draw<float>(size_t(K), std::uniform_real_distribution<float>(0.5f, 1.5f), g);
      GpuBuffer<float> dres(res), dw(w);
      GpuBuffer<uint16_t> ddelta(delta), xn(n), xref(n);
      const float eps = 1e-5f;
      ops::rmsnorm_of_sum(dres.get(), ddelta.get(), dw.get(), M, int(K), eps, xref.get(), nullptr);
      // the dispatcher's own choice, and one K split (these small N would otherwise take several,
      // which the fused kernel does not do)
      LinearOptions one_split;
      one_split.k_splits = 1;
      for (const DeviceWeight* wt : {&pair, &plain})
        for (const LinearOptions& opt : {LinearOptions{}, one_split}) {
          const int64_t N = wt == &pair ? I : 96;
          const std::string what = fmt_case(M, wt == &pair, opt.k_splits);
          if (opt.k_splits == 1) {
            EXPECT_EQ(linear_fuses_rmsnorm(*wt, M, opt), fusing_format && M == 1 && K <= 4096) << what;
          }
          GpuBuffer<uint16_t> want(size_t(M * N)), got(size_t(M * N));
          linear(xref.get(), M, *wt, want.get(), nullptr, opt);
          got.poison();
          linear_rmsnorm({dres.get(), ddelta.get(), dw.get(), eps, xn.get()}, M, *wt, {got.get()}, nullptr, opt);
          EXPECT_EQ(got.host(), want.host()) << what;
        }
      EXPECT_EQ(dres.host(), res);  // the residual is not written
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GemvNorm, ::testing::Values("nvfp4", "mxfp4", "fp4-g128", "int4-g128", "nf4",
                                                              "razer-fp4-g128"),
                         test::FormatName());

TEST(GemvNormErrors, MissingInputsThrow) {
  std::vector<float> w(64 * 256, 0.25f);
  const DeviceWeight d = upload(quantize("nvfp4", w.data(), 64, 256), "w");
  GpuBuffer<float> res(256), nw(256);
  GpuBuffer<uint16_t> delta(256), xn(256), y(64);
  EXPECT_THROW(linear_rmsnorm({nullptr, delta.get(), nw.get(), 1e-5f, xn.get()}, 1, d, {y.get()}, nullptr), Error);
  EXPECT_THROW(linear_rmsnorm({res.get(), delta.get(), nullptr, 1e-5f, xn.get()}, 1, d, {y.get()}, nullptr), Error);
  EXPECT_THROW(linear_rmsnorm({res.get(), delta.get(), nw.get(), 1e-5f, nullptr}, 1, d, {y.get()}, nullptr), Error);
}

}  // namespace
}  // namespace nibble::cuda

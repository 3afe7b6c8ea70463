// Stacked GEMV (q/k/v in one launch, gate/up as one fused SwiGLU launch): each part's outputs equal those of the part run on
// its own with the same kernel choice, bit for bit (a row's sum does not depend on its neighbours),
// with per-part global scales; and the dispatcher's pick stays within rounding of float64.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
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

// Parts of different row counts (not multiples of a CTA's rows) and magnitudes, so their global
// scales differ.
std::vector<PackedTensor> random_parts(const std::string& format, const std::vector<int64_t>& rows, int64_t K,
                                       std::mt19937_64& g) {
  std::vector<PackedTensor> out;
  float magnitude = 1.0f;
  for (int64_t N : rows) {
    std::normal_distribution<float> d(0.0f, magnitude);
    std::vector<float> w(size_t(N * K));
    for (float& v : w) v = d(g);
    out.push_back(quantize(format, w.data(), N, K));
    magnitude *= 7.0f;
  }
  return out;
}

std::vector<uint16_t> random_x(int M, int64_t K, std::mt19937_64& g) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> x(size_t(M) * size_t(K));
  for (auto& v : x) v = float_to_half(d(g));
  return x;
}

class GemvStacked : public ::testing::TestWithParam<std::string> {};

TEST_P(GemvStacked, EachPartEqualsItsOwnLaunch) {
  const std::string format = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int64_t K = 512;
  for (const std::vector<int64_t>& rows : {std::vector<int64_t>{40, 17, 23}, std::vector<int64_t>{33, 50}}) {
    const std::vector<PackedTensor> parts = random_parts(format, rows, K, g);
    std::vector<const PackedTensor*> ptrs;
    std::vector<DeviceWeight> alone;
    for (const PackedTensor& p : parts) ptrs.push_back(&p), alone.push_back(upload(p, "part"));
    const DeviceWeight stack = upload_stacked(ptrs, "stack");
    ASSERT_EQ(stack.part_rows, rows);
    if (parts[0].global_scale != 1.0f) {  // formats with a global scale: the per-part scales differ
      ASSERT_NE(stack.part_scales[0], stack.part_scales[1]);
    }

    std::vector<std::pair<std::string, LinearOptions>> variants;
    LinearOptions cc;
    cc.engine = Engine::cuda_cores, cc.rows_per_warp = 2, cc.k_splits = 2;
    variants.push_back({"cuda cores", cc});
    if (stack.qweight_mma) {
      LinearOptions tc;
      tc.engine = Engine::tensor_cores;
      variants.push_back({"tensor cores", tc});
      tc.row_blocks = 4;
      variants.push_back({"tensor cores row_blocks 4", tc});
      if (tensor_core_splits_supported()) {
        tc.row_blocks = 1, tc.k_splits = 2;
        variants.push_back({"tensor cores k_splits 2", tc});
        LinearOptions st;  // the stream kernel (sm_90)
        st.engine = Engine::tensor_stream, st.row_blocks = 2;
        variants.push_back({"tensor stream", st});
      }
    }
    for (int M : {1, 3, 9, 16}) {
      const std::vector<uint16_t> x = random_x(M, K, g);
      GpuBuffer<uint16_t> dx(x);
      for (const auto& [name, opt] : variants) {
        std::vector<std::unique_ptr<GpuBuffer<uint16_t>>> ys, refs;
        std::vector<uint16_t*> yp;
        for (int64_t N : rows) {
          ys.push_back(std::make_unique<GpuBuffer<uint16_t>>(size_t(M * N)));
          refs.push_back(std::make_unique<GpuBuffer<uint16_t>>(size_t(M * N)));
          ys.back()->poison();
          yp.push_back(ys.back()->get());
        }
        linear(dx.get(), M, stack, yp, nullptr, opt);
        for (size_t i = 0; i < rows.size(); ++i) {
          linear(dx.get(), M, alone[i], refs[i]->get(), nullptr, opt);
          const std::vector<uint16_t> got = ys[i]->host(), want = refs[i]->host();
          int bad = 0;
          for (size_t j = 0; j < got.size(); ++j) bad += got[j] != want[j] || !std::isfinite(half_to_float(got[j]));
          EXPECT_EQ(bad, 0) << format << " " << name << " M=" << M << " part " << i << " of " << rows.size();
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GemvStacked,
                         ::testing::Values("nvfp4", "nvfp4-razer", "mxfp4", "int4-g128", "razer-fp4-g128",
                                           "razer-fp3-g128", "nf4", "fp16"),
                         test::FormatName());

// The fused SwiGLU: silu(gate) * up from one launch equals the two GEMVs then ops::silu_mul.
TEST_P(GemvStacked, SiluPairEqualsSeparateGemvsThenSiluMul) {
  const std::string format = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int64_t K = 384, I = 45;  // odd row count: the last pair is not in a full CTA
  const std::vector<PackedTensor> parts = random_parts(format, {I, I}, K, g);
  const DeviceWeight pair = upload_silu_pair(parts[0], parts[1], "gate_up");
  const DeviceWeight gate = upload(parts[0], "gate"), up = upload(parts[1], "up");
  std::vector<std::pair<std::string, LinearOptions>> variants;
  for (int ks : {1, 4}) {
    LinearOptions cc;
    cc.engine = Engine::cuda_cores, cc.rows_per_warp = 2, cc.k_splits = ks;
    variants.push_back({"cuda cores ks " + std::to_string(ks), cc});
  }
  if (pair.qweight_mma) {
    LinearOptions tc;
    tc.engine = Engine::tensor_cores;
    variants.push_back({"tensor cores", tc});
    tc.row_blocks = 2;
    variants.push_back({"tensor cores row_blocks 2", tc});
    if (tensor_core_splits_supported()) {
      tc.k_splits = 4;
      variants.push_back({"tensor cores row_blocks 2 k_splits 4", tc});
      LinearOptions st;  // the stream kernel (sm_90)
      st.engine = Engine::tensor_stream, st.row_blocks = 1;
      variants.push_back({"tensor stream row_blocks 1", st});
    }
  }
  for (int M : {1, 2, 5, 16}) {
    GpuBuffer<uint16_t> dx(random_x(M, K, g)), act(size_t(M * I)), yg(size_t(M * I)), yu(size_t(M * I));
    for (const auto& [name, opt] : variants) {
      act.poison();
      linear(dx.get(), M, pair, act.get(), nullptr, opt);
      linear(dx.get(), M, gate, yg.get(), nullptr, opt);
      linear(dx.get(), M, up, yu.get(), nullptr, opt);
      ops::silu_mul(yg.get(), yu.get(), int64_t(M) * I, yg.get(), nullptr);
      const std::vector<uint16_t> got = act.host(), want = yg.host();
      int bad = 0;
      for (size_t j = 0; j < got.size(); ++j) bad += got[j] != want[j] || !std::isfinite(half_to_float(got[j]));
      EXPECT_EQ(bad, 0) << format << " " << name << " M=" << M;
    }
  }
  EXPECT_THROW(upload_silu_pair(parts[0], quantize(format, std::vector<float>(size_t(7 * K), 1.0f).data(), 7, K)),
               Error);  // row counts differ
}

TEST(GemvStackedErrors, MismatchedPartsAndOutputsThrow) {
  std::vector<float> w(64 * 256, 0.25f);
  const PackedTensor a = quantize("nvfp4", w.data(), 64, 256);
  const PackedTensor b = quantize("nvfp4", w.data(), 32, 512);
  const PackedTensor c = quantize("int4-g128", w.data(), 64, 256);
  const std::vector<const PackedTensor*> one{&a}, bad_k{&a, &b}, bad_format{&a, &c}, ok{&a, &a};
  EXPECT_THROW(upload_stacked(one, "s"), Error);
  EXPECT_THROW(upload_stacked(bad_k, "s"), Error);
  EXPECT_THROW(upload_stacked(bad_format, "s"), Error);
  const DeviceWeight s = upload_stacked(ok, "s");
  GpuBuffer<uint16_t> x(256), y(128);
  EXPECT_THROW(linear(x.get(), 1, s, std::vector<uint16_t*>{y.get()}, nullptr), Error);  // 2 parts need 2 outputs
  EXPECT_THROW(linear(x.get(), 1, s, y.get(), nullptr), Error);
}

}  // namespace
}  // namespace nibble::cuda

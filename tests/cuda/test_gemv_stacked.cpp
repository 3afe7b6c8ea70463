// Stacked GEMV (q/k/v in one launch, gate/up as one fused SwiGLU launch): each part's outputs equal those of the part run on
// its own with the same kernel choice, bit for bit (a row's sum does not depend on its neighbours),
// with per-part global scales; and the dispatcher's pick stays within rounding of float64.
#include <gtest/gtest.h>

#include <algorithm>
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

// The kernel choices a stack can run on: CUDA cores (2 and 4 rows per warp, with K splits), tensor
// cores (1 and 4 row blocks, a K split over a cluster) and the stream kernel, where w has them.
std::vector<std::pair<std::string, LinearOptions>> engine_variants(const DeviceWeight& w) {
  std::vector<std::pair<std::string, LinearOptions>> variants;
  for (int rows : {2, 4}) {
    LinearOptions cc;
    cc.engine = Engine::cuda_cores, cc.rows_per_warp = rows, cc.k_splits = 6 - rows;
    variants.push_back({"cuda cores " + std::to_string(rows) + " rows", cc});
  }
  if (!w.qweight_mma) return variants;
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
  return variants;
}

int count_bad(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  int bad = 0;
  for (size_t j = 0; j < got.size(); ++j) bad += got[j] != want[j] || !std::isfinite(half_to_float(got[j]));
  return bad;
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

    const auto variants = engine_variants(stack);
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
          EXPECT_EQ(count_bad(ys[i]->host(), refs[i]->host()), 0)
              << format << " " << name << " M=" << M << " part " << i << " of " << rows.size();
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
      EXPECT_EQ(count_bad(act.host(), yg.host()), 0) << format << " " << name << " M=" << M;
    }
  }
  EXPECT_THROW(upload_silu_pair(parts[0], quantize(format, std::vector<float>(size_t(7 * K), 1.0f).data(), 7, K)),
               Error);  // row counts differ
}

// q/k/v in RoPE pair order (upload_stacked with a head dim): linear() writes the same bits as the
// stack in the given order, and linear_rope_store the same bits as linear() then
// ops::qk_norm_rope_store into an FP16 cache (a token out of the cache's range: nothing written).
TEST_P(GemvStacked, RopePairOrder) {
  const std::string format = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int64_t K = 512;
  for (int d : {64, 128}) {
    const int nh = 4, nkv = 2, slots = 3, max_ctx = 40;
    const std::vector<PackedTensor> parts = random_parts(format, {nh * d, nkv * d, nkv * d}, K, g);
    const std::vector<const PackedTensor*> ptrs{&parts[0], &parts[1], &parts[2]};
    const DeviceWeight plain = upload_stacked(ptrs, "qkv"), paired = upload_stacked(ptrs, "qkv", d);
    std::vector<float> cs(size_t(max_ctx) * d);
    std::uniform_real_distribution<float> angle(-1.0f, 1.0f);
    for (float& c : cs) c = angle(g);
    GpuBuffer<float> dcs(cs);
    for (int M : {1, 3, 16}) {
      std::vector<int32_t> slot(static_cast<size_t>(M)), pos(static_cast<size_t>(M));
      const int p0 = int(g() % max_ctx);  // distinct positions: no two tokens store the same row
      for (int m = 0; m < M; ++m) slot[size_t(m)] = m % slots, pos[size_t(m)] = (p0 + 7 * m) % max_ctx;
      if (M > 1) pos[1] = max_ctx;  // out of range
      GpuBuffer<int32_t> dslot(slot), dpos(pos);
      GpuBuffer<uint16_t> dx(random_x(M, K, g));
      const size_t cache = size_t(slots) * nkv * max_ctx * d;
      GpuBuffer<uint16_t> q(size_t(M) * nh * d), k(size_t(M) * nkv * d), v(size_t(M) * nkv * d);
      GpuBuffer<uint16_t> q2(size_t(M) * nh * d), k2(size_t(M) * nkv * d), v2(size_t(M) * nkv * d);
      GpuBuffer<uint16_t> kc(cache), vc(cache), kc2(cache), vc2(cache);
      for (const auto& [name, opt] : engine_variants(paired)) {
        SCOPED_TRACE(format + " " + name + " d=" + std::to_string(d) + " M=" + std::to_string(M));
        for (GpuBuffer<uint16_t>* b : {&q, &k, &v, &q2, &k2, &v2, &kc, &vc, &kc2, &vc2}) b->poison();
        linear(dx.get(), M, plain, {q.get(), k.get(), v.get()}, nullptr, opt);
        linear(dx.get(), M, paired, {q2.get(), k2.get(), v2.get()}, nullptr, opt);
        EXPECT_EQ(count_bad(q2.host(), q.host()), 0);
        EXPECT_EQ(count_bad(k2.host(), k.host()), 0);
        EXPECT_EQ(count_bad(v2.host(), v.host()), 0);
        // the two kernels, then the fused one into the second cache and q2
        ops::KvCache kv{ops::KvType::fp16, kc.get(), vc.get(), nullptr, nullptr, max_ctx};
        ops::qk_norm_rope_store(q.get(), k.get(), v.get(), M, nh, nkv, d, nullptr, nullptr, 1e-6f, dcs.get(),
                                dslot.get(), dpos.get(), kv, nullptr);
        q2.poison();
        linear_rope_store(dx.get(), M, paired, q2.get(), {dcs.get(), dslot.get(), dpos.get(), kc2.get(), vc2.get(), max_ctx},
                          nullptr, opt);
        const std::vector<uint16_t> got = q2.host(), want = q.host();
        for (int m = 0; m < M; ++m) {
          if (pos[size_t(m)] >= max_ctx) continue;  // the fused kernel leaves q unwritten, the RoPE kernel unrotated
          const auto row = [&](const std::vector<uint16_t>& y) {
            return std::vector<uint16_t>(y.begin() + m * nh * d, y.begin() + (m + 1) * nh * d);
          };
          EXPECT_EQ(count_bad(row(got), row(want)), 0) << "q of token " << m;
        }
        // every element compared: the rows not stored keep the same poison in both
        const auto kw = kc.host(), kg = kc2.host(), vw = vc.host(), vg = vc2.host();
        EXPECT_EQ(std::count_if(kw.begin(), kw.end(), [](uint16_t h) { return h != 0xFFFF; }), int64_t(M - (M > 1)) * nkv * d);
        EXPECT_TRUE(kg == kw) << "k cache";
        EXPECT_TRUE(vg == vw) << "v cache";
      }
    }
  }
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
  const std::vector<const PackedTensor*> qkv{&a, &a, &b};
  EXPECT_THROW(upload_stacked(ok, "s", 64), Error);        // RoPE pair order takes q, k and v
  EXPECT_THROW(upload_stacked({&a, &a, &a}, "s", 48), Error);  // 64 rows are not whole heads of 48
  EXPECT_THROW(upload_stacked(qkv, "s", 64), Error);       // K differs
  const DeviceWeight paired = upload_stacked({&a, &a, &a}, "s", 32);
  GpuBuffer<uint16_t> x(256), y(128);
  const RopeStore none{};
  EXPECT_THROW(linear_rope_store(x.get(), 1, s, y.get(), none, nullptr), Error);       // not in pair order
  EXPECT_THROW(linear_rope_store(x.get(), 1, paired, y.get(), none, nullptr), Error);  // null pointers
  EXPECT_THROW(linear(x.get(), 1, s, std::vector<uint16_t*>{y.get()}, nullptr), Error);  // 2 parts need 2 outputs
  EXPECT_THROW(linear(x.get(), 1, s, y.get(), nullptr), Error);
}

}  // namespace
}  // namespace nibble::cuda

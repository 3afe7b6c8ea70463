// qk_norm_rope_store vs a float64 reference: per-head RMSNorm (optional), HF RoPE at each token's
// position, K/V written to (slot, head, pos) of the cache and nowhere else. Tolerance per element:
// 2^-10 relative (fp16 rounding) + 1e-6 of the rotated pair's magnitude (FP32 rotation).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "nibble/cuda/ops.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "ops_test_util.h"

namespace nibble::cuda::test {
namespace {

namespace ops = nibble::cuda::ops;

struct RopeCase {
  int T, nh, nkv, d, n_slots, max_ctx;
  bool norm, decode;  // decode: one token per slot at random positions; else consecutive in slot 1
};

std::vector<float> make_cos_sin(int max_ctx, int d) {
  std::vector<float> cs(size_t(max_ctx) * d);
  for (int p = 0; p < max_ctx; ++p)
    for (int i = 0; i < d / 2; ++i) {
      const double a = p / std::pow(10000.0, 2.0 * i / d);
      cs[size_t(p) * d + i] = float(std::cos(a));
      cs[size_t(p) * d + d / 2 + i] = float(std::sin(a));
    }
  return cs;
}

// One head (d values at src) normed (w may be null) and rotated at position p, in float64.
std::vector<double> ref_head(const uint16_t* src, int d, const float* w, double eps, const float* cs,
                             std::vector<double>* pair_mag) {
  std::vector<double> x(static_cast<size_t>(d)), y(static_cast<size_t>(d));
  double ss = 0;
  for (int i = 0; i < d; ++i) ss += (x[size_t(i)] = h2d(src[i])) * x[size_t(i)];
  if (w)
    for (int i = 0; i < d; ++i) x[size_t(i)] *= w[i] / std::sqrt(ss / d + eps);
  pair_mag->resize(size_t(d));
  const int h = d / 2;
  for (int i = 0; i < h; ++i) {
    const double a = x[size_t(i)], b = x[size_t(i + h)], c = cs[i], s = cs[h + i];
    y[size_t(i)] = a * c - b * s;
    y[size_t(i + h)] = b * c + a * s;
    (*pair_mag)[size_t(i)] = (*pair_mag)[size_t(i + h)] = std::fabs(a) + std::fabs(b);
  }
  return y;
}

using OpsRope = SeededTest;

TEST_F(OpsRope, NormRopeStoreMatchesReference) {
  const RopeCase cases[] = {{1, 4, 4, 64, 1, 16, false, false},   {7, 8, 2, 128, 3, 300, true, false},
                            {37, 16, 2, 64, 2, 100, true, false}, {3, 32, 8, 128, 3, 200, false, true},
                            {5, 12, 4, 64, 5, 64, true, true}};
  for (const RopeCase& c : cases) {
    SCOPED_TRACE("T=" + std::to_string(c.T) + " nh=" + std::to_string(c.nh) + " nkv=" + std::to_string(c.nkv) +
                 " d=" + std::to_string(c.d) + (c.norm ? " norm" : "") + (c.decode ? " decode" : " prefill"));
    const int qw = c.nh * c.d, kw = c.nkv * c.d;
    const auto q = random_half(size_t(c.T) * qw, 2.0f), k = random_half(size_t(c.T) * kw, 2.0f),
               v = random_half(size_t(c.T) * kw);
    const auto qn = random_float(size_t(c.d)), kn = random_float(size_t(c.d));
    std::vector<int32_t> slot(size_t(c.T)), pos(size_t(c.T));
    const int pos0 = c.decode ? 0 : uniform_int(0, c.max_ctx - c.T);
    for (int t = 0; t < c.T; ++t) {
      slot[size_t(t)] = c.decode ? t : 1 % c.n_slots;
      pos[size_t(t)] = c.decode ? uniform_int(0, c.max_ctx - 1) : pos0 + t;
    }
    if (c.decode) pos[0] = 0, pos[size_t(c.T - 1)] = c.max_ctx - 1;
    const auto cs = make_cos_sin(c.max_ctx, c.d);
    const size_t cache = size_t(c.n_slots) * c.nkv * c.max_ctx * c.d;
    GpuBuffer<uint16_t> dq(q), dk(k), dv(v), kc(cache), vc(cache);
    GpuBuffer<float> dqn(qn), dkn(kn), dcs(cs);
    GpuBuffer<int32_t> dslot(slot), dpos(pos);
    kc.poison();
    vc.poison();
    const float eps = 1e-6f;
    ops::qk_norm_rope_store(dq.get(), dk.get(), dv.get(), c.T, c.nh, c.nkv, c.d, c.norm ? dqn.get() : nullptr,
                            c.norm ? dkn.get() : nullptr, eps, dcs.get(), dslot.get(), dpos.get(),
                            {ops::KvType::fp16, kc.get(), vc.get(), nullptr, nullptr, c.max_ctx}, nullptr);
    const auto gq = dq.host(), gk = kc.host(), gv = vc.host();
    CloseCheck check("rope");
    std::vector<bool> written(cache, false);
    std::vector<double> mag;
    for (int t = 0; t < c.T; ++t) {
      const float* cst = &cs[size_t(pos[size_t(t)]) * c.d];
      for (int h = 0; h < c.nh; ++h) {
        const size_t off = size_t(t) * qw + size_t(h) * c.d;
        const auto ref = ref_head(&q[off], c.d, c.norm ? qn.data() : nullptr, eps, cst, &mag);
        for (int i = 0; i < c.d; ++i)
          check(h2d(gq[off + i]), ref[size_t(i)], std::fabs(ref[size_t(i)]) / 1024 + 1e-6 * mag[size_t(i)] + 1e-7,
                "q t=" + std::to_string(t) + " h=" + std::to_string(h) + " i=" + std::to_string(i));
      }
      for (int g = 0; g < c.nkv; ++g) {
        const size_t src = size_t(t) * kw + size_t(g) * c.d;
        const size_t dst = ((size_t(slot[size_t(t)]) * c.nkv + g) * c.max_ctx + pos[size_t(t)]) * c.d;
        const auto ref = ref_head(&k[src], c.d, c.norm ? kn.data() : nullptr, eps, cst, &mag);
        for (int i = 0; i < c.d; ++i) {
          check(h2d(gk[dst + i]), ref[size_t(i)], std::fabs(ref[size_t(i)]) / 1024 + 1e-6 * mag[size_t(i)] + 1e-7,
                "k t=" + std::to_string(t) + " g=" + std::to_string(g) + " i=" + std::to_string(i));
          EXPECT_EQ(gv[dst + i], v[src + i]) << "v t=" << t << " g=" << g << " i=" << i;
          written[dst + i] = true;
        }
      }
    }
    int touched = 0;
    for (size_t i = 0; i < cache; ++i)
      if (!written[i]) touched += gk[i] != 0xFFFF || gv[i] != 0xFFFF;
    EXPECT_EQ(touched, 0) << "cache entries written outside (slot, head, pos)";
  }
}

// The E4M3 cache: V rows are the CPU format library's fp8-e4m3 bytes exactly (codes and FP32
// scale); K rows, rotated in FP32 on the GPU, dequantize to the float64 rotation within one E4M3
// step (the rounding of a value a float rotation moved across a tie may differ).
TEST_F(OpsRope, NormRopeStoreE4m3MatchesTheCpuFormat) {
  const RopeCase cases[] = {{3, 8, 2, 128, 3, 300, true, false}, {4, 32, 8, 128, 4, 200, false, true},
                            {6, 12, 4, 64, 6, 64, true, true}};
  for (const RopeCase& c : cases) {
    SCOPED_TRACE("T=" + std::to_string(c.T) + " nkv=" + std::to_string(c.nkv) + " d=" + std::to_string(c.d));
    const int qw = c.nh * c.d, kw = c.nkv * c.d;
    auto q = random_half(size_t(c.T) * qw, 2.0f), k = random_half(size_t(c.T) * kw, 2.0f), v = random_half(size_t(c.T) * kw);
    std::fill_n(v.begin(), c.d, uint16_t(0));  // an all-zero row: scale 0, codes 0
    v[size_t(c.d)] = 0x0001;                   // fp16 subnormals in the next row
    const auto kn = random_float(size_t(c.d));
    std::vector<int32_t> slot(size_t(c.T)), pos(size_t(c.T));
    const int pos0 = c.decode ? 0 : uniform_int(0, c.max_ctx - c.T);
    for (int t = 0; t < c.T; ++t) {
      slot[size_t(t)] = c.decode ? t : 1 % c.n_slots;
      pos[size_t(t)] = c.decode ? uniform_int(0, c.max_ctx - 1) : pos0 + t;
    }
    const auto cs = make_cos_sin(c.max_ctx, c.d);
    const size_t rows = size_t(c.n_slots) * c.nkv * c.max_ctx;
    GpuBuffer<uint16_t> dq(q), dk(k), dv(v);
    GpuBuffer<uint8_t> kc(rows * c.d), vc(rows * c.d);
    GpuBuffer<float> ks(rows), vs(rows), dkn(kn), dcs(cs);
    GpuBuffer<int32_t> dslot(slot), dpos(pos);
    kc.poison(), vc.poison(), ks.poison(), vs.poison();
    const float eps = 1e-6f;
    ops::qk_norm_rope_store(dq.get(), dk.get(), dv.get(), c.T, c.nh, c.nkv, c.d, nullptr, c.norm ? dkn.get() : nullptr,
                            eps, dcs.get(), dslot.get(), dpos.get(),
                            {ops::KvType::e4m3, kc.get(), vc.get(), ks.get(), vs.get(), c.max_ctx}, nullptr);
    const auto gk = kc.host(), gv = vc.host();
    const auto gks = ks.host(), gvs = vs.host();
    const FormatInfo& fp8 = find_format("fp8-e4m3");
    CloseCheck check("k (e4m3)");
    std::vector<bool> written(rows, false);
    std::vector<double> mag;
    for (int t = 0; t < c.T; ++t)
      for (int g = 0; g < c.nkv; ++g) {
        const size_t src = size_t(t) * kw + size_t(g) * c.d;
        const size_t row = (size_t(slot[size_t(t)]) * c.nkv + g) * c.max_ctx + size_t(pos[size_t(t)]);
        written[row] = true;
        std::vector<float> vf(size_t(c.d));
        for (int i = 0; i < c.d; ++i) vf[size_t(i)] = half_to_float(v[src + i]);
        const PackedTensor want = fp8.quantize(vf.data(), 1, c.d, {});
        EXPECT_EQ(std::memcmp(&gvs[row], want.scales.data(), 4), 0) << "v scale t=" << t << " g=" << g;
        EXPECT_EQ(std::memcmp(&gv[row * c.d], want.qweight.data(), size_t(c.d)), 0) << "v codes t=" << t << " g=" << g;
        const auto ref = ref_head(&k[src], c.d, c.norm ? kn.data() : nullptr, eps, &cs[size_t(pos[size_t(t)]) * c.d], &mag);
        double amax = 0;
        for (double x : ref) amax = std::max(amax, std::fabs(x));
        check(gks[row], amax / 448, amax / 448 * 1e-5, "k scale t=" + std::to_string(t) + " g=" + std::to_string(g));
        std::vector<float> deq(size_t(c.d));
        PackedTensor got = want;
        std::memcpy(got.qweight.data(), &gk[row * c.d], size_t(c.d));
        std::memcpy(got.scales.data(), &gks[row], 4);
        fp8.dequantize_rows(got, 0, 1, deq.data());
        for (int i = 0; i < c.d; ++i)  // one E4M3 step: 2^-3 relative (normal), 2^-9 x scale (subnormal)
          check(deq[size_t(i)], ref[size_t(i)], std::fabs(ref[size_t(i)]) / 8 + gks[row] / 512 + 1e-7,
                "k t=" + std::to_string(t) + " g=" + std::to_string(g) + " i=" + std::to_string(i));
      }
    int touched = 0;
    for (size_t r = 0; r < rows; ++r) {
      if (written[r]) continue;
      uint32_t bits = 0;
      std::memcpy(&bits, &gks[r], 4);
      touched += bits != 0xFFFFFFFFu;
      for (int i = 0; i < c.d; ++i) touched += gk[r * c.d + i] != 0xFF || gv[r * c.d + i] != 0xFF;
    }
    EXPECT_EQ(touched, 0) << "cache entries written outside (slot, head, pos)";
  }
}

TEST(OpsRopeArgs, BadHeadDimThrows) {
  GpuBuffer<uint16_t> h(64);
  GpuBuffer<float> f(64);
  GpuBuffer<int32_t> i(4);
  EXPECT_THROW(ops::qk_norm_rope_store(h.get(), h.get(), h.get(), 1, 1, 1, 7, nullptr, nullptr, 1e-6f, f.get(),
                                       i.get(), i.get(), {ops::KvType::fp16, h.get(), h.get(), nullptr, nullptr, 4},
                                       nullptr),
               Error);
  EXPECT_THROW(ops::qk_norm_rope_store(h.get(), h.get(), h.get(), 1, 1, 1, 12, nullptr, nullptr, 1e-6f, f.get(),
                                       i.get(), i.get(), {ops::KvType::e4m3, h.get(), h.get(), f.get(), f.get(), 4},
                                       nullptr),
               Error);  // E4M3 rows need d a multiple of 8
  EXPECT_THROW(ops::qk_norm_rope_store(h.get(), h.get(), h.get(), 1, 1, 1, 8, nullptr, nullptr, 1e-6f, f.get(),
                                       i.get(), i.get(), {ops::KvType::e4m3, h.get(), h.get(), nullptr, nullptr, 4},
                                       nullptr),
               Error);  // and their scales
}

}  // namespace
}  // namespace nibble::cuda::test

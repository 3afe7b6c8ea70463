// Prefill and decode attention vs float64 on fresh random caches, FP16 and E4M3 (the reference
// reads the E4M3 values as the CPU format dequantizes them). Cache entries that must not be read
// (beyond the attended positions, other slots) hold NaN; outputs are poisoned first.
// Tolerance: 2^-10 relative (fp16 output rounding) + 5e-5 x max|V| (FP32 softmax and sums).
#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>

#include "attention_ref.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"
#include "ops_test_util.h"

namespace nibble::cuda::test {
namespace {

namespace ops = nibble::cuda::ops;

struct Shape {
  int nh, nkv, d;
};

constexpr ops::KvType kTypes[] = {ops::KvType::fp16, ops::KvType::e4m3};

// Decode attention's cluster combine (sm_90) is switched per case; this puts it back on at the end.
struct ClusterSetting {
  ClusterSetting() = default;
  ClusterSetting(const ClusterSetting&) = delete;
  ClusterSetting& operator=(const ClusterSetting&) = delete;
  ~ClusterSetting() { ops::set_attention_cluster(true); }
};
const char* type_name(ops::KvType t) { return t == ops::KvType::e4m3 ? "e4m3" : "fp16"; }

class OpsAttention : public SeededTest {
 protected:
  // A K or V cache [n_slots][nkv][max_ctx][d] holding random values at positions < filled[slot],
  // NaN elsewhere.
  HostKv make_cache(ops::KvType type, int n_slots, int nkv, int max_ctx, int d, const std::vector<int>& filled) {
    HostKv c(type, size_t(n_slots) * nkv * max_ctx, d);
    std::vector<float> row(static_cast<size_t>(d));
    for (int s = 0; s < n_slots; ++s)
      for (int g = 0; g < nkv; ++g)
        for (int p = 0; p < filled[size_t(s)]; ++p) {
          for (float& x : row) x = normal(1.5f);
          c.set_row((size_t(s) * nkv + g) * max_ctx + p, row.data());
        }
    return c;
  }
  // Attention outputs [rows][nh][d] of (query row, slot, last position) triples against float64
  // attention over the caches as the kernel read them.
  static void check_rows(const std::vector<uint16_t>& got, const std::vector<uint16_t>& q, const HostKv& kc,
                         const HostKv& vc, const std::vector<std::array<int, 4>>& rows, Shape s, int max_ctx,
                         double atol, const std::string& what, const std::string& where) {
    const auto [nh, nkv, d] = s;
    CloseCheck check(what);
    for (const auto& [row, h, slot, last] : rows) {
      const size_t head = (size_t(slot) * nkv + h / (nh / nkv)) * max_ctx, off = (size_t(row) * nh + h) * d;
      const auto ref = ref_attention(&q[off], [&](int j, int i) { return kc.at(head + j, i); },
                                     [&](int j, int i) { return vc.at(head + j, i); }, last, d);
      for (int i = 0; i < d; ++i)
        check(h2d(got[off + i]), ref[size_t(i)], std::fabs(ref[size_t(i)]) / 1024 + atol,
              where + "row=" + std::to_string(row) + " last=" + std::to_string(last) + " h=" + std::to_string(h) +
                  " i=" + std::to_string(i));
    }
  }
  // A decode output [B][nh][d]: every row b, head h over its slot's rows 0..pos[b].
  static void check_decode(const std::vector<uint16_t>& got, const std::vector<uint16_t>& q, const HostKv& kc,
                           const HostKv& vc, const std::vector<int32_t>& slot, const std::vector<int32_t>& pos,
                           Shape s, int max_ctx, double atol, const std::string& what, const std::string& where) {
    std::vector<std::array<int, 4>> rows;
    for (size_t b = 0; b < slot.size(); ++b)
      for (int h = 0; h < s.nh; ++h) rows.push_back({int(b), h, slot[b], pos[b]});
    check_rows(got, q, kc, vc, rows, s, max_ctx, atol, what, where);
  }
};

TEST_F(OpsAttention, PrefillMatchesReference) {
  struct Case {
    int T, pos0, max_ctx;
    Shape s;
  };
  const Case cases[] = {{1, 0, 8, {4, 4, 64}},       {7, 5, 12, {8, 2, 128}},     {37, 100, 200, {32, 8, 128}},
                        {300, 0, 300, {8, 1, 64}},   {300, 211, 600, {12, 4, 64}}, {1, 599, 600, {8, 8, 128}},
                        {2048, 1000, 3100, {4, 1, 128}}};
  for (const ops::KvType type : kTypes)
    for (const Case& c : cases) {
      const auto [nh, nkv, d] = c.s;
      SCOPED_TRACE(std::string(type_name(type)) + " T=" + std::to_string(c.T) + " pos0=" + std::to_string(c.pos0) +
                   " nh=" + std::to_string(nh) + " nkv=" + std::to_string(nkv) + " d=" + std::to_string(d));
      const int n_slots = 3, slot = 2;
      std::vector<int> filled(n_slots, 0);
      filled[slot] = c.pos0 + c.T;
      const HostKv kc = make_cache(type, n_slots, nkv, c.max_ctx, d, filled);
      const HostKv vc = make_cache(type, n_slots, nkv, c.max_ctx, d, filled);
      const auto q = random_half(size_t(c.T) * nh * d, 1.5f);
      DeviceKv dkv(kc, vc, c.max_ctx);
      GpuBuffer<uint16_t> dq(q), out(size_t(c.T) * nh * d);
      out.poison();
      ops::attention_prefill(dq.get(), c.T, slot, c.pos0, dkv.cache, nh, nkv, d, out.get(), nullptr);
      // Every (query, head) when there are few, else 512 random ones plus the last query's heads.
      std::vector<std::array<int, 4>> rows;
      auto add = [&](int t, int h) { rows.push_back({t, h, slot, c.pos0 + t}); };
      if (int64_t(c.T) * nh <= 4096) {
        for (int t = 0; t < c.T; ++t)
          for (int h = 0; h < nh; ++h) add(t, h);
      } else {
        for (int i = 0; i < 512; ++i) add(uniform_int(0, c.T - 1), uniform_int(0, nh - 1));
        for (int h = 0; h < nh; ++h) add(c.T - 1, h);
      }
      check_rows(out.host(), q, kc, vc, rows, c.s, c.max_ctx, 5e-5 * vc.max_abs(), "attention_prefill", "");
    }
}

TEST_F(OpsAttention, DecodeMatchesReference) {
  struct Case {
    int B, max_ctx;
    Shape s;
    bool hint_is_max_ctx;  // else the largest position of the batch
  };
  const Case cases[] = {{1, 1, {4, 4, 64}, true},      {1, 37, {32, 8, 128}, false}, {3, 600, {32, 8, 128}, true},
                        {3, 4100, {16, 2, 64}, false}, {64, 300, {32, 8, 128}, true}, {64, 530, {8, 1, 64}, false},
                        {5, 700, {12, 2, 128}, true},  {7, 260, {5, 1, 64}, true},   {16, 560, {32, 8, 128}, false},
                        {2, 333, {40, 2, 64}, true},   {2, 1000, {32, 1, 128}, false}};
  const ClusterSetting restore;
  for (const bool cluster : {false, true})
  for (const ops::KvType type : kTypes)
    for (const Case& c : cases) {
      ops::set_attention_cluster(cluster);
      const auto [nh, nkv, d] = c.s;
      SCOPED_TRACE(std::string(type_name(type)) + " B=" + std::to_string(c.B) + " max_ctx=" + std::to_string(c.max_ctx) +
                   " nh=" + std::to_string(nh) + " nkv=" + std::to_string(nkv) + " d=" + std::to_string(d) +
                   (cluster ? " cluster combine allowed" : " workspace combine"));
      // One query per slot, slots shuffled; positions random with 0 and max_ctx - 1 included.
      const int n_slots = c.B + 1;
      std::vector<int32_t> slot(size_t(c.B)), pos(size_t(c.B));
      for (int b = 0; b < c.B; ++b) slot[size_t(b)] = b + 1, pos[size_t(b)] = uniform_int(0, c.max_ctx - 1);
      std::shuffle(slot.begin(), slot.end(), gen);
      pos[0] = c.max_ctx - 1;
      if (c.B > 1) pos[1] = 0;
      std::vector<int> filled(size_t(n_slots), 0);
      for (int b = 0; b < c.B; ++b) filled[size_t(slot[size_t(b)])] = pos[size_t(b)] + 1;
      const HostKv kc = make_cache(type, n_slots, nkv, c.max_ctx, d, filled);
      const HostKv vc = make_cache(type, n_slots, nkv, c.max_ctx, d, filled);
      const auto q = random_half(size_t(c.B) * nh * d, 1.5f);
      const int hint = c.hint_is_max_ctx ? c.max_ctx - 1 : *std::max_element(pos.begin(), pos.end());
      DeviceKv dkv(kc, vc, c.max_ctx);
      GpuBuffer<uint16_t> dq(q), out(size_t(c.B) * nh * d);
      GpuBuffer<int32_t> dslot(slot), dpos(pos);
      GpuBuffer<uint8_t> ws(ops::attention_decode_workspace_bytes(c.B, nh, d, c.max_ctx));
      out.poison();
      ws.zero();  // its chunk counters start at zero
      ops::attention_decode(dq.get(), c.B, dslot.get(), dpos.get(), hint, dkv.cache, nh, nkv, d, out.get(), ws.get(),
                            nullptr);
      check_decode(out.host(), q, kc, vc, slot, pos, c.s, c.max_ctx, 5e-5 * vc.max_abs(), "attention_decode", "");
    }
}

// A decode step's order on one stream: qk_norm_rope_store normalizes and rotates q in place and
// writes each new token's K and V rows, then attention_decode, which may start before that kernel
// has finished (programmatic dependent launch) and may request older rows before its wait (a grid
// resident at once: batch 1 here), must see the new q and the new rows. The rows hold NaN before
// the store, so a row read too early shows as NaN; q / k norms and a random rotation make a q read
// too early differ from the q the reference takes (read back after the step).
TEST_F(OpsAttention, DecodeSeesTheRowsStoredJustBefore) {
  const int nh = 32, nkv = 8, d = 128, max_ctx = 600;
  std::vector<float> cs(size_t(max_ctx) * d);
  for (int p = 0; p < max_ctx; ++p)
    for (int i = 0; i < d / 2; ++i) {
      const double t = 6.283185307179586 * uniform();
      cs[size_t(p) * d + i] = float(std::cos(t)), cs[size_t(p) * d + d / 2 + i] = float(std::sin(t));
    }
  GpuBuffer<float> dcs(cs);
  std::vector<float> qn(d), kn(d);
  for (float& w : qn) w = 1.0f + normal(0.2f);
  for (float& w : kn) w = 1.0f + normal(0.2f);
  GpuBuffer<float> dqn(qn), dkn(kn);
  // One workspace for every step, zeroed once: the chunk counters must come back to zero after each
  // step, and a step of fewer rows must find them where a larger one left them.
  GpuBuffer<uint8_t> ws(ops::attention_decode_workspace_bytes(16, nh, d, max_ctx));
  ws.zero();
  const ClusterSetting restore;
  for (const int B : {16, 1, 16})
    for (const ops::KvType type : kTypes) {
      const bool cluster = (type == ops::KvType::e4m3) != (B == 1);  // both combines at each batch
      ops::set_attention_cluster(cluster);
      SCOPED_TRACE(std::string(type_name(type)) + " B=" + std::to_string(B) +
                   (cluster ? " cluster combine allowed" : " workspace combine"));
      for (int rep = 0; rep < 5; ++rep) {
        std::vector<int32_t> slot(static_cast<size_t>(B)), pos(static_cast<size_t>(B));
        for (int b = 0; b < B; ++b) slot[size_t(b)] = b, pos[size_t(b)] = uniform_int(0, max_ctx - 1);
        std::shuffle(slot.begin(), slot.end(), gen);
        const int edges[] = {max_ctx - 1, 0, 31, 32, 63, 64};  // tile and chunk edges
        if (B > 1) std::copy(std::begin(edges), std::end(edges), pos.begin());
        else if (rep < 4) pos[0] = edges[rep + 2];
        std::vector<int> by_slot(static_cast<size_t>(B));  // rows below each query's position filled
        for (int b = 0; b < B; ++b) by_slot[size_t(slot[size_t(b)])] = pos[size_t(b)];
        const HostKv kc0 = make_cache(type, B, nkv, max_ctx, d, by_slot), vc0 = make_cache(type, B, nkv, max_ctx, d, by_slot);
        GpuBuffer<int32_t> dslot(slot), dpos(pos);
        GpuBuffer<uint16_t> out(size_t(B) * nh * d);
        cudaStream_t stream;
        NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        const auto q = random_half(size_t(B) * nh * d, 1.5f), k = random_half(size_t(B) * nkv * d, 1.5f),
                   v = random_half(size_t(B) * nkv * d, 1.5f);
        GpuBuffer<uint16_t> dq(q), dk(k), dv(v);
        DeviceKv dkv(kc0, vc0, max_ctx);
        out.poison();
        ops::qk_norm_rope_store(dq.get(), dk.get(), dv.get(), B, nh, nkv, d, dqn.get(), dkn.get(), 1e-6f, dcs.get(),
                                dslot.get(), dpos.get(), dkv.cache, stream);
        ops::attention_decode(dq.get(), B, dslot.get(), dpos.get(), max_ctx - 1, dkv.cache, nh, nkv, d, out.get(),
                              ws.get(), stream);
        NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
        NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));
        double vmax = vc0.max_abs();
        for (uint16_t x : v) vmax = std::max(vmax, std::fabs(h2d(x)));
        check_decode(out.host(), dq.host(), dkv.host(kc0, false), dkv.host(vc0, true), slot, pos, {nh, nkv, d},
                     max_ctx, 5e-5 * vmax, "attention_decode after the store", "rep=" + std::to_string(rep) + " ");
      }
    }
}

TEST(OpsAttentionArgs, BadShapesThrow) {
  GpuBuffer<uint16_t> h(1024);
  GpuBuffer<int32_t> i(4);
  GpuBuffer<uint8_t> ws(1 << 16);
  const ops::KvCache kv{ops::KvType::fp16, h.get(), h.get(), nullptr, nullptr, 8};
  const ops::KvCache e4m3_no_scales{ops::KvType::e4m3, h.get(), h.get(), nullptr, nullptr, 8};
  EXPECT_THROW(ops::attention_prefill(h.get(), 1, 0, 0, kv, 4, 4, 96, h.get(), nullptr), Error);
  EXPECT_THROW(ops::attention_prefill(h.get(), 4, 0, 6, kv, 4, 4, 64, h.get(), nullptr), Error);
  EXPECT_THROW(ops::attention_prefill(h.get(), 1, 0, 0, kv, 6, 4, 64, h.get(), nullptr), Error);
  EXPECT_THROW(ops::attention_prefill(h.get(), 1, 0, 0, e4m3_no_scales, 4, 4, 64, h.get(), nullptr), Error);
  EXPECT_THROW(ops::attention_decode(h.get(), 1, i.get(), i.get(), 8, kv, 4, 4, 64, h.get(), ws.get(), nullptr),
               Error);  // max_pos_hint must be < max_ctx
  EXPECT_THROW(ops::attention_decode(h.get(), 1, i.get(), i.get(), 0, kv, 4, 4, 64, h.get(), nullptr, nullptr), Error);
  EXPECT_THROW(ops::attention_decode(h.get(), 1, i.get(), i.get(), 0, e4m3_no_scales, 4, 4, 64, h.get(), ws.get(),
                                     nullptr),
               Error);
}

}  // namespace
}  // namespace nibble::cuda::test

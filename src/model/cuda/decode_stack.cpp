#include "model/cuda/decode_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/device_info.h"
#include "nibble/cuda/check.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

using detail::kStackRows;
using detail::kStackSegK;

detail::StackLauncher launcher(WeightKind k) {
  switch (k) {
    case WeightKind::int4_g128: return detail::launch_stack_int4_g128;
    case WeightKind::fp4_g128: return detail::launch_stack_fp4_g128;
    default: return nullptr;
  }
}

struct Plan {
  std::string why;  // empty: supported
  detail::StackLauncher launch = nullptr;
  int slot_bytes = 0, x_bytes = 0, slots = 0;
};

// w's GEMV for the kernel: the CUDA-core layout's arguments, bytes per row, and per piece of a row
// (codes and metadata are proportional to the elements); the reason when the kernel cannot stream w
// (a layer's `what`, expected [N, K] of `kind`) tile by tile in whole 16-byte copies. Grows
// slot_bytes to w's largest slot.
std::string stack_gemv(const DeviceWeight* w, const std::string& what, int64_t N, int64_t K, WeightKind kind,
                       int& slot_bytes, detail::StackGemv& g) {
  if (!w) return fmt::format("{} has no GEMV layout of its own", what);
  if (w->kind != kind) return fmt::format("{} is {}, other weights are not", what, w->format);
  if (w->N != N || w->K != K) return fmt::format("{} is [{}, {}], expected [{}, {}]", what, w->N, w->K, N, K);
  if (N % kStackRows || K % 32 || K > detail::kStackMaxSegs * kStackSegK || w->qweight_bytes % size_t(N) ||
      w->scales_bytes % size_t(N))
    return fmt::format("{}: [{}, {}] does not split into tiles of {} rows and at most {} slots", what, N, K, kStackRows,
                       detail::kStackMaxSegs);
  detail::weight_args(*w, g.a);
  g.a.M = 1;
  const int64_t q_row = int64_t(w->qweight_bytes) / N, s_row = int64_t(w->scales_bytes) / N;
  g.q_row = int(q_row), g.s_row = int(s_row);
  g.segs = int((K + kStackSegK - 1) / kStackSegK);
  for (int sg = 0; sg < g.segs; ++sg) {
    const int64_t k0 = int64_t(sg) * kStackSegK, kn = std::min<int64_t>(kStackSegK, K - k0);
    const bool whole = q_row * kn % K == 0 && s_row * kn % K == 0 && q_row * k0 % K == 0 && s_row * k0 % K == 0;
    const int64_t qb = q_row * kn / K, sb = s_row * kn / K, copy = g.segs == 1 ? kStackRows : 1;
    if (!whole || (qb * copy) % 16 || (sb * copy) % 16 || (g.segs > 1 && (q_row % 16 || s_row % 16)))
      return fmt::format("{}: rows of {} elements do not split into 16-byte copies", what, K);
    g.seg_q[sg] = int(qb), g.seg_s[sg] = int(sb), g.seg_q0[sg] = int(q_row * k0 / K), g.seg_s0[sg] = int(s_row * k0 / K);
    slot_bytes = std::max(slot_bytes, int(kStackRows * (qb + sb)));
  }
  return "";
}

// For a grid of G CTAs: each GEMV's parts (warps per slot: the fewest that give every warp two units,
// at most kStackMaxParts), the partial sums' shared memory, and the ring slots left beside the rest
// (0: fewer than 4).
int fit(std::vector<detail::StackLayerArgs>& layers, int G, int slot_bytes, int x_bytes, int d, int& part_floats) {
  part_floats = 0;
  for (detail::StackLayerArgs& L : layers)
    for (detail::StackGemv* g : {&L.qkv, &L.o, &L.gate_up, &L.down}) {
      const int per_cta = (g->a.N / kStackRows + G - 1) / G * g->segs;
      g->parts = 1;
      while (g->parts < detail::kStackMaxParts && per_cta * g->parts < 2 * detail::kStackConsumers) g->parts *= 2;
      part_floats = std::max(part_floats, per_cta * g->parts * kStackRows);
    }
  const size_t fixed = detail::stack_smem_bytes(0, slot_bytes, x_bytes, d, part_floats);
  const size_t slots = fixed < detail::kStackSmemMax ? (detail::kStackSmemMax - fixed) / size_t(slot_bytes) : 0;
  return slots < 4 ? 0 : int(std::min<size_t>(slots, detail::kStackMaxSlots));
}

// layers: receives each layer's GEMVs (the rest of StackLayerArgs is the caller's).
Plan plan(const DeviceModel::Impl& m, ops::KvType kv, std::vector<detail::StackLayerArgs>* layers = nullptr) {
  const ModelConfig& c = *m.cfg;
  const int H = c.hidden_size, I = c.intermediate_size, nh = c.num_heads, nkv = c.num_kv_heads, d = c.head_dim;
  Plan p;
  auto no = [&](std::string why) {
    p.why = std::move(why);
    return p;
  };
  if (tc::compute_capability() < 90) return no("the kernel needs sm_90 (bulk asynchronous copies)");
  if (kv != ops::KvType::fp16) return no("the KV cache is not FP16");
  if (c.qk_norm) return no("the layers have q/k norms");
  if (d != 64 && d != 128) return no(fmt::format("head_dim {} (64 or 128)", d));
  if (nkv < 1 || nh % nkv || nh / nkv > detail::kStackMaxGroup)
    return no(fmt::format("{} query heads over {} KV heads (at most {} per KV head)", nh, nkv, detail::kStackMaxGroup));
  if (m.layers.empty() || H % 8 || I % 8) return no("no layers, or widths not multiples of 8");
  if (H > detail::kStackMaxH) return no(fmt::format("hidden size {} (at most {})", H, detail::kStackMaxH));
  std::vector<detail::StackLayerArgs> out;
  const WeightKind kind = m.layers[0].qkv_stack ? m.layers[0].qkv_stack->kind : WeightKind::fp16;
  p.launch = launcher(kind);
  if (!p.launch) return no(fmt::format("format {} has no whole-stack kernel", m.layers[0].q.format()));
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const DeviceLayer& L = m.layers[l];
    const std::string at = fmt::format("layer {}: ", l);
    if (!L.qkv_stack || L.qkv_stack->rope_head_dim != d) return no(at + "q/k/v are not stacked in RoPE pair order");
    if (!L.gate_up_pair || !L.gate_up_pair->silu_pairs) return no(at + "gate/up are not stacked as SwiGLU pairs");
    if (L.o.has_bias() || L.down.has_bias()) return no(at + "o or down has a bias");
    detail::StackLayerArgs& a = out.emplace_back();
    for (const auto& [w, what, N, K, g] :
         {std::tuple{&*L.qkv_stack, "q/k/v", int64_t(nh + 2 * nkv) * d, int64_t(H), &a.qkv},
          std::tuple{L.o.gemv_weight(), "o", int64_t(H), int64_t(nh) * d, &a.o},
          std::tuple{&*L.gate_up_pair, "gate/up", 2 * int64_t(I), int64_t(H), &a.gate_up},
          std::tuple{L.down.gemv_weight(), "down", int64_t(H), int64_t(I), &a.down}})
      if (std::string why = stack_gemv(w, at + what, N, K, kind, p.slot_bytes, *g); !why.empty()) return no(why);
  }
  p.x_bytes = int((2 * std::max({H, I, nh * d}) + 15) / 16 * 16);
  int part_floats = 0;
  if (!fit(out, tc::sm_count(), p.slot_bytes, p.x_bytes, d, part_floats))
    return no(fmt::format("tiles of {} bytes leave room for fewer than 4 ring slots", p.slot_bytes));
  if (layers) *layers = std::move(out);
  return p;
}

}  // namespace

std::string DecodeStack::unsupported(const DeviceModel::Impl& m, ops::KvType kv) { return plan(m, kv).why; }

DecodeStack::DecodeStack(const DeviceModel::Impl& m, const std::vector<ops::KvCache>& caches, const StackBuffers& b) {
  std::vector<detail::StackLayerArgs> layers;
  const Plan p = plan(m, caches.empty() ? ops::KvType::fp16 : caches[0].type, &layers);
  if (!p.why.empty()) throw Error("whole-stack decode kernel: " + p.why);
  const ModelConfig& c = *m.cfg;
  const int d = c.head_dim;
  if (caches.size() != m.layers.size())
    throw Error(fmt::format("whole-stack decode kernel: {} KV caches for {} layers", caches.size(), m.layers.size()));
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const DeviceLayer& L = m.layers[l];
    detail::StackLayerArgs& a = layers[l];
    a.qkv.a.y = reinterpret_cast<__half*>(b.q);
    a.qkv.a.rope_cs = b.rope, a.qkv.a.rope_slot = b.slot, a.qkv.a.rope_pos = b.pos;
    a.qkv.a.k_cache = static_cast<__half*>(caches[l].k), a.qkv.a.v_cache = static_cast<__half*>(caches[l].v);
    a.qkv.a.rope_max_ctx = caches[l].max_ctx;
    a.gate_up.a.y = reinterpret_cast<__half*>(b.h);
    a.attn_norm = L.attn_norm.get(), a.ffn_norm = L.ffn_norm.get();
  }
  host_layers_ = std::move(layers);
  attn_ws_ = DeviceBuffer<float>(size_t(c.num_heads) * detail::kStackMaxChunks * size_t(d + 2));
  sync_ = DeviceBuffer<unsigned>(size_t(1 + c.num_kv_heads));
  NIBBLE_CUDA_CHECK(cudaMemset(sync_.get(), 0, sync_.bytes()));
  detail::StackArgs& a = args_;
  a.n_layers = int(host_layers_.size());
  a.H = c.hidden_size, a.I = c.intermediate_size, a.nh = c.num_heads, a.nkv = c.num_kv_heads, a.d = d;
  a.max_ctx = caches[0].max_ctx;
  a.eps = float(c.rms_norm_eps), a.qscale = float(1.0 / std::sqrt(double(d)) * M_LOG2E);
  a.x = b.x, a.q = reinterpret_cast<__half*>(b.q), a.att = reinterpret_cast<__half*>(b.att);
  a.h = reinterpret_cast<__half*>(b.h);
  a.pos = b.pos, a.slot = b.slot;
  a.attn_ws = attn_ws_.get(), a.sync = sync_.get();
  a.slot_bytes = p.slot_bytes, a.x_bytes = p.x_bytes;
  launch_ = p.launch;
  set_ctas(0);
}

void DecodeStack::set_ctas(int ctas) {
  const int G = ctas > 0 ? std::min(ctas, tc::sm_count()) : tc::sm_count();
  if (G == args_.ctas) return;  // planned and uploaded for this grid already
  const int slots = fit(host_layers_, G, args_.slot_bytes, args_.x_bytes, args_.d, args_.part_floats);
  if (!slots) throw Error(fmt::format("whole-stack decode kernel: {} CTAs leave room for fewer than 4 ring slots", G));
  args_.ctas = G, args_.ring_slots = slots;
  layers_ = DeviceBuffer<detail::StackLayerArgs>(host_layers_);
  args_.layers = layers_.get();
}

void DecodeStack::run(cudaStream_t stream) const {
  NIBBLE_CUDA_CHECK(cudaMemsetAsync(sync_.get(), 0, sizeof(unsigned), stream));  // the grid barrier's count
  launch_(args_, stream);
}

}  // namespace nibble::cuda

// The forward pass of one step on the device: the CUDA twin of Session::forward
// (src/model/session.cpp), with FP16 activations around an FP32 residual stream.
#include "model/cuda/batch_impl.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "nibble/cuda/check.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"

namespace nibble::cuda {

void Batch::Impl::forward(int T, bool decode, int prefill_slot, int pos0, int n_out, GemmWorkspace& ws) {
  const int H = c.hidden_size, nh = c.num_heads, nkv = c.num_kv_heads, d = c.head_dim;
  const float eps = float(c.rms_norm_eps);
  const LinearExec ex{stream, &ws, &cublas, stack_out.get()};
  ops::embed(m.embed.get(), ids, T, H, x.get(), stream);
  mark("embed");
  if (decode && stack_runs(T)) {  // every layer in one kernel, then the final norm
    decode_stack->run(stream);
    ops::rmsnorm(x.get(), m.final_norm.get(), T, H, eps, xn.get(), stream);
    if (n_out > 0) m.logits(xn.get(), n_out, logits.get(), logits16.get(), ex);
    return;
  }
  ops::rmsnorm(x.get(), m.layers[0].attn_norm.get(), T, H, eps, xn.get(), stream);
  mark("rmsnorm");
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const DeviceLayer& L = m.layers[l];
    const ops::KvCache kv = kv_cache(int(l));
    // At decode the stacked q/k/v GEMV rotates q and k and stores k and v itself where it can (one
    // kernel less per layer). (Left out for --in-step, the rotation is not fused either.)
    const RopeStore rs{rope.get(), slot, pos, static_cast<uint16_t*>(kv.k), static_cast<uint16_t*>(kv.v), kv.max_ctx};
    const bool fused_rope = decode && runs("qk_norm_rope_store", decode) && rope_store_fused(L, T);
    if (runs("qkv", decode)) L.run_qkv(xn.get(), T, q.get(), k.get(), v.get(), ex, fused_rope ? &rs : nullptr);
    mark("qkv");
    if (!fused_rope && runs("qk_norm_rope_store", decode))
      ops::qk_norm_rope_store(q.get(), k.get(), v.get(), T, nh, nkv, d, c.qk_norm ? L.q_norm.get() : nullptr,
                              c.qk_norm ? L.k_norm.get() : nullptr, eps, rope.get(), slot, pos, kv, stream);
    mark("qk_norm_rope_store");
    if (!decode)
      ops::attention_prefill(q.get(), T, prefill_slot, pos0, kv, nh, nkv, d, att.get(), stream);
    else if (runs("attention", decode))
      ops::attention_decode(q.get(), T, slot, pos, attn_hint, kv, nh, nkv, d, att.get(), attn_ws.get(), stream);
    mark("attention");
    // At one decode row the FFN norm runs inside the gate/up GEMV where it can (one kernel less per
    // layer): o's output then waits in o_out, and the next norm adds it and down's to x.
    // (Left out for --in-step, the norm is not fused either: the step then runs without it.)
    const bool fused_norm = decode && fuse_ffn_norm && runs("ffn_norm", decode) && L.ffn_norm_fuses(T);
    uint16_t* o_y = fused_norm ? o_out.get() : tmp.get();
    if (runs("o", decode)) L.o.run(att.get(), T, o_y, ex);
    mark("o");
    if (!fused_norm && runs("ffn_norm", decode))
      ops::add_rmsnorm(x.get(), tmp.get(), L.ffn_norm.get(), T, H, eps, xn.get(), stream);
    mark("add_rmsnorm");
    if (runs("gate_up_silu", decode)) {
      if (fused_norm) L.run_swiglu_normed(x.get(), o_y, eps, T, gate.get(), xn.get(), ex);
      else L.run_swiglu(xn.get(), T, gate.get(), up.get(), ex);
    }
    mark("gate_up_silu");
    if (runs("down", decode)) L.down.run(gate.get(), T, tmp.get(), ex);
    mark("down");
    // the residual add fused with the next layer's input norm, or the final norm
    const float* next = l + 1 < m.layers.size() ? m.layers[l + 1].attn_norm.get() : m.final_norm.get();
    if (runs("next_norm", decode))
      ops::add_rmsnorm(x.get(), fused_norm ? o_y : tmp.get(), next, T, H, eps, xn.get(), stream,
                       fused_norm ? tmp.get() : nullptr);
    mark("add_rmsnorm");
  }
  if (n_out > 0) m.logits(xn.get() + int64_t(T - n_out) * H, n_out, logits.get(), logits16.get(), ex);
  mark("lm_head");
}

const std::vector<std::string>& Batch::decode_op_names() {
  static const std::vector<std::string> names{"qkv",          "qk_norm_rope_store", "attention", "o", "ffn_norm",
                                              "gate_up_silu", "down",               "next_norm"};
  return names;
}

void Batch::skip_decode_ops(std::span<const std::string> ops) {
  const std::vector<std::string>& known = decode_op_names();
  for (const std::string& op : ops)
    if (std::find(known.begin(), known.end(), op) == known.end())
      throw Error(fmt::format("Batch::skip_decode_ops: unknown op '{}' (known: {})", op, fmt::join(known, ", ")));
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(p_->stream));  // no captured step still running
  p_->skipped_ops.assign(ops.begin(), ops.end());
  p_->graphs.clear();  // the captured steps hold the old set of ops
}

void Batch::set_fused_ffn_norm(bool on) {
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(p_->stream));  // no captured step still running
  p_->fuse_ffn_norm = on;
  p_->graphs.clear();
}

bool Batch::Impl::rope_store_fused(const DeviceLayer& L, int rows) const {
  return fuse_rope_store && kv_type == ops::KvType::fp16 && L.rope_store_fuses(rows);
}

bool Batch::fuses_rope_store(int rows) const {
  const auto& layers = p_->m.layers;
  return !layers.empty() && std::all_of(layers.begin(), layers.end(),
                                        [&](const DeviceLayer& L) { return p_->rope_store_fused(L, rows); });
}

void Batch::set_fused_rope_store(bool on) {
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(p_->stream));  // no captured step still running
  p_->fuse_rope_store = on;
  p_->graphs.clear();
}

void Batch::set_decode_stack(bool on, int ctas) {
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(p_->stream));  // no captured step still running
  if (on) p_->enable_decode_stack(ctas);
  else p_->use_decode_stack = false;
  p_->graphs.clear();
}

bool Batch::runs_decode_stack(int rows, std::string* why_not) const {
  const Impl& b = *p_;
  if (why_not)
    *why_not = !b.decode_stack_why.empty() ? b.decode_stack_why
               : rows != 1                ? "more than one row"
               : !b.use_decode_stack      ? "turned off"
               : !b.skipped_ops.empty()   ? "decode ops are left out (skip_decode_ops)"
                                          : "";
  return b.stack_runs(rows);
}

void Batch::Impl::decode_step(int B) {
  auto enqueue = [&] { forward(B, true, 0, 0, B, decode_ws); };
  if (!use_graphs) return enqueue();
  graphs.run({B, attn_hint}, enqueue, [&] { return std::vector<const void*>{decode_ws.get(1, 0), decode_ws.get(1, 1)}; }, stream);
}

}  // namespace nibble::cuda

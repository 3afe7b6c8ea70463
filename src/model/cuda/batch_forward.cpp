// The forward pass of one step on the device: the CUDA twin of Session::forward
// (src/model/session.cpp), with FP16 activations around an FP32 residual stream.
#include "model/cuda/batch_impl.h"
#include "nibble/cuda/ops.h"

namespace nibble::cuda {

void Batch::Impl::forward(int T, bool decode, int prefill_slot, int pos0, int n_out, GemmWorkspace& ws) {
  const int H = c.hidden_size, nh = c.num_heads, nkv = c.num_kv_heads, d = c.head_dim;
  const float eps = float(c.rms_norm_eps);
  const LinearExec ex{stream, &ws, &cublas, stack_out.get()};
  ops::embed(m.embed.get(), ids, T, H, x.get(), stream);
  mark("embed");
  ops::rmsnorm(x.get(), m.layers[0].attn_norm.get(), T, H, eps, xn.get(), stream);
  mark("rmsnorm");
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const DeviceLayer& L = m.layers[l];
    L.run_qkv(xn.get(), T, q.get(), k.get(), v.get(), ex);
    mark("qkv");
    const ops::KvCache kv = kv_cache(int(l));
    ops::qk_norm_rope_store(q.get(), k.get(), v.get(), T, nh, nkv, d, c.qk_norm ? L.q_norm.get() : nullptr,
                            c.qk_norm ? L.k_norm.get() : nullptr, eps, rope.get(), slot, pos, kv, stream);
    mark("qk_norm_rope_store");
    if (decode)
      ops::attention_decode(q.get(), T, slot, pos, attn_hint, kv, nh, nkv, d, att.get(), attn_ws.get(), stream);
    else
      ops::attention_prefill(q.get(), T, prefill_slot, pos0, kv, nh, nkv, d, att.get(), stream);
    mark("attention");
    L.o.run(att.get(), T, tmp.get(), ex);
    mark("o");
    ops::add_rmsnorm(x.get(), tmp.get(), L.ffn_norm.get(), T, H, eps, xn.get(), stream);
    mark("add_rmsnorm");
    L.run_swiglu(xn.get(), T, gate.get(), up.get(), ex);
    mark("gate_up_silu");
    L.down.run(gate.get(), T, tmp.get(), ex);
    mark("down");
    // the residual add fused with the next layer's input norm, or the final norm
    const float* next = l + 1 < m.layers.size() ? m.layers[l + 1].attn_norm.get() : m.final_norm.get();
    ops::add_rmsnorm(x.get(), tmp.get(), next, T, H, eps, xn.get(), stream);
    mark("add_rmsnorm");
  }
  if (n_out > 0) m.logits(xn.get() + int64_t(T - n_out) * H, n_out, logits.get(), logits16.get(), ex);
  mark("lm_head");
}

void Batch::Impl::decode_step(int B) {
  auto enqueue = [&] { forward(B, true, 0, 0, B, decode_ws); };
  if (!use_graphs) return enqueue();
  graphs.run({B, attn_hint}, enqueue, [&] { return std::vector<const void*>{decode_ws.get(1, 0), decode_ws.get(1, 1)}; }, stream);
}

}  // namespace nibble::cuda

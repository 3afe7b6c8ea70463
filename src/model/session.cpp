// Session: one sequence's forward pass through a Llama-family model (FP32 activations).
#include <cmath>
#include <string>

#include "model/ops.h"
#include "model/session_state.h"
#include "model/weights.h"
#include "nibble/error.h"
#include "nibble/linear.h"

namespace nibble {
namespace {

// y[T, out] = x[T, in] · W^T (+ bias); an act_quant layer's input is first quantized per token
// with the activation format (into `xq`, unless the caller already did: x == xq).
void run_linear(const LinearWeight& lw, const FormatInfo* act, const float* x, int64_t T,
                std::vector<float>& xq, float* y) {
  const int64_t K = lw.w.cols, N = lw.w.rows;
  if (act && lw.act_quant && x != xq.data()) {
    xq.assign(x, x + T * K);
    fake_quantize_rows(*act, xq.data(), T, K);
    x = xq.data();
  }
  linear_cpu(x, T, lw.w, y);
  if (!lw.bias.empty())
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) y[t * N + n] += lw.bias[size_t(n)];
}

// Quantizes x into xq once when several quantized linears share the input (q/k/v, gate/up).
const float* shared_input(const LinearWeight& lw, const FormatInfo* act, const float* x,
                          int64_t T, int64_t K, std::vector<float>& xq) {
  if (!act || !lw.act_quant) return x;
  xq.assign(x, x + T * K);
  fake_quantize_rows(*act, xq.data(), T, K);
  return xq.data();
}

void attention_block(const ModelWeights& w, const LayerWeights& L, SessionState& s, int layer,
                     int64_t T) {
  const ModelConfig& c = w.cfg;
  const int H = c.hidden_size, nh = c.num_heads, nkv = c.num_kv_heads, d = c.head_dim;
  const FormatInfo* act = w.act_format;
  ops::rmsnorm(s.x.data(), L.attn_norm.data(), T, H, c.rms_norm_eps, s.xn.data());
  const float* in = shared_input(L.q, act, s.xn.data(), T, H, s.xq);
  run_linear(L.q, act, in, T, s.xq, s.q.data());
  run_linear(L.k, act, in, T, s.xq, s.k.data());
  run_linear(L.v, act, in, T, s.xq, s.v.data());
  if (c.qk_norm) {
    ops::rmsnorm(s.q.data(), L.q_norm.data(), T * nh, d, c.rms_norm_eps, s.q.data());
    ops::rmsnorm(s.k.data(), L.k_norm.data(), T * nkv, d, c.rms_norm_eps, s.k.data());
  }
  ops::apply_rope(s.q.data(), T, nh, d, s.pos, s.rope_cos_sin.data());
  ops::apply_rope(s.k.data(), T, nkv, d, s.pos, s.rope_cos_sin.data());
  float* kc = s.k_cache[size_t(layer)].data();
  float* vc = s.v_cache[size_t(layer)].data();
  for (int64_t t = 0; t < T; ++t)
    for (int g = 0; g < nkv; ++g) {
      const int64_t dst = (int64_t(g) * s.max_ctx + s.pos + t) * d, src = (t * nkv + g) * d;
      std::copy_n(s.k.data() + src, d, kc + dst);
      std::copy_n(s.v.data() + src, d, vc + dst);
    }
  if (w.kv_format)  // a quantized KV cache: the new rows as the format stores them
    for (int g = 0; g < nkv; ++g) {
      const int64_t first = (int64_t(g) * s.max_ctx + s.pos) * d;
      fake_quantize_rows(*w.kv_format, kc + first, T, d, w.kv_block, "K-cache row");
      fake_quantize_rows(*w.kv_format, vc + first, T, d, w.kv_block, "V-cache row");
    }
  ops::attention(s.q.data(), T, s.pos, kc, vc, s.max_ctx, nh, nkv, d, s.att.data());
  run_linear(L.o, act, s.att.data(), T, s.xq, s.tmp.data());
  for (int64_t i = 0; i < T * H; ++i) s.x[size_t(i)] += s.tmp[size_t(i)];
}

void mlp_block(const ModelWeights& w, const LayerWeights& L, SessionState& s, int64_t T) {
  const ModelConfig& c = w.cfg;
  const int H = c.hidden_size, I = c.intermediate_size;
  const FormatInfo* act = w.act_format;
  ops::rmsnorm(s.x.data(), L.ffn_norm.data(), T, H, c.rms_norm_eps, s.xn.data());
  const float* in = shared_input(L.gate, act, s.xn.data(), T, H, s.xq);
  run_linear(L.gate, act, in, T, s.xq, s.gate.data());
  run_linear(L.up, act, in, T, s.xq, s.up.data());
  ops::silu_mul(s.gate.data(), s.up.data(), T * I);
  run_linear(L.down, act, s.gate.data(), T, s.xq, s.tmp.data());
  for (int64_t i = 0; i < T * H; ++i) s.x[size_t(i)] += s.tmp[size_t(i)];
}

}  // namespace

Session::Session(const Model& m, int max_context) : m_(&m), s_(std::make_unique<SessionState>()) {
  const ModelConfig& c = m.config();
  if (max_context <= 0)
    throw Error("Session: max_context must be positive, got " + std::to_string(max_context));
  s_->max_ctx = max_context;
  const int d = c.head_dim;
  const std::vector<double> inv = ops::rope_inv_freq(c);
  s_->rope_cos_sin.resize(size_t(max_context) * d);
  for (int p = 0; p < max_context; ++p)
    for (int i = 0; i < d / 2; ++i) {
      const double a = double(p) * inv[size_t(i)];
      s_->rope_cos_sin[size_t(p) * d + i] = float(std::cos(a));
      s_->rope_cos_sin[size_t(p) * d + d / 2 + i] = float(std::sin(a));
    }
  const size_t cache = size_t(c.num_kv_heads) * max_context * d;
  s_->k_cache.assign(size_t(c.num_layers), std::vector<float>(cache));
  s_->v_cache.assign(size_t(c.num_layers), std::vector<float>(cache));
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

int Session::position() const { return s_->pos; }
int Session::max_context() const { return s_->max_ctx; }
void Session::reset() { s_->pos = 0; }

std::vector<float> Session::forward(std::span<const int32_t> tokens, bool all_logits) {
  const ModelWeights& w = m_->weights();
  const ModelConfig& c = w.cfg;
  SessionState& s = *s_;
  const int64_t T = int64_t(tokens.size());
  if (T == 0) return {};
  if (s.pos + T > s.max_ctx)
    throw Error("context overflow: position " + std::to_string(s.pos) + " + " +
                std::to_string(T) + " tokens exceeds the session's max context " +
                std::to_string(s.max_ctx));
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = w.output_weight().rows;
  const int64_t qw = int64_t(c.num_heads) * c.head_dim, kw = int64_t(c.num_kv_heads) * c.head_dim;
  s.x.resize(size_t(T * H));
  s.xn.resize(size_t(T * H));
  s.q.resize(size_t(T * qw));
  s.att.resize(size_t(T * qw));
  s.k.resize(size_t(T * kw));
  s.v.resize(size_t(T * kw));
  s.gate.resize(size_t(T * I));
  s.up.resize(size_t(T * I));
  s.tmp.resize(size_t(T * H));
  const FormatInfo& emb = find_format(w.embed.format);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = tokens[size_t(t)];
    if (id < 0 || id >= w.embed.rows)
      throw Error("token id " + std::to_string(id) + " at index " + std::to_string(t) +
                  " is outside the vocabulary [0, " + std::to_string(w.embed.rows) + ")");
    emb.dequantize_rows(w.embed, id, 1, s.x.data() + t * H);
  }
  for (int l = 0; l < c.num_layers; ++l) {
    attention_block(w, w.layers[size_t(l)], s, l, T);
    mlp_block(w, w.layers[size_t(l)], s, T);
  }
  s.pos += int(T);
  // Only the rows whose logits are wanted go through the final norm and the output layer.
  const int64_t n_out = all_logits ? T : 1;
  const float* last = s.x.data() + (T - n_out) * H;
  ops::rmsnorm(last, w.final_norm.data(), n_out, H, c.rms_norm_eps, s.xn.data());
  std::vector<float> logits(size_t(n_out * V));
  const float* in = s.xn.data();
  if (w.act_format && w.output_quantized()) {
    s.xq.assign(in, in + n_out * H);
    fake_quantize_rows(*w.act_format, s.xq.data(), n_out, H);
    in = s.xq.data();
  }
  linear_cpu(in, n_out, w.output_weight(), logits.data());
  return logits;
}

}  // namespace nibble

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "model/cuda/device_model_impl.h"
#include "model/cuda/upload_choice.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

DeviceBuffer<float> norm(const std::vector<float>& w) { return DeviceBuffer<float>(w); }

DeviceLinear linear(const LinearWeight& lw, const std::optional<DeviceWeight>& gemv_stack) {
  return DeviceLinear(lw.w, lw.bias, lw.name, gemv_stack ? DeviceLinear::Held::gemv_in_layer : DeviceLinear::Held::here);
}

// upload() of the parts as one GEMV weight (plain float parts as FP16), or nothing where a part's
// format or shape has no GEMV kernel (each part then uploads and runs on its own). CUDA failures
// are not swallowed.
template <class Upload>
std::optional<DeviceWeight> stack(std::initializer_list<const LinearWeight*> parts, bool enabled, const Upload& upload) {
  if (!enabled) return std::nullopt;
  std::vector<PackedTensor> converted(parts.size());  // bf16 / fp32 parts as fp16
  std::vector<const PackedTensor*> ws;
  for (const LinearWeight* p : parts) {
    if (!takes_gemv(p->w.format)) return std::nullopt;
    ws.push_back(&gemv_source(p->w, p->name, converted[ws.size()]));
  }
  std::optional<DeviceWeight> out;
  std::string why;  // a stack no kernel takes: the parts run alone, nothing to report
  try_upload(out, why, [&] { return upload(ws); });
  return out;
}

// Whether the stacked q/k/v GEMV can apply RoPE and store k and v itself (no q/k norms, no biases):
// its stack then holds q and k in RoPE pair order.
bool rope_fuses(const LayerWeights& L, const ModelConfig& c) {
  return !c.qk_norm && L.q.bias.empty() && L.k.bias.empty() && L.v.bias.empty();
}

// One GEMV launch per 16 rows; out_rows[i]: the row length of output i.
template <size_t P>
void run_gemv(const DeviceWeight& w, const uint16_t* x, int M, std::array<uint16_t*, P> ys,
              std::array<int64_t, P> out_rows, cudaStream_t stream) {
  for (int m0 = 0; m0 < M; m0 += 16) {
    std::vector<uint16_t*> at(P);
    for (size_t i = 0; i < P; ++i) at[i] = ys[i] + int64_t(m0) * out_rows[i];
    linear(x + int64_t(m0) * w.K, std::min(16, M - m0), w, at, stream);
  }
}

// A stack runs whenever one of its parts would take the GEMV at this M (parts may switch to the
// GEMM at slightly different M).
template <size_t P>
bool stack_runs(const std::optional<DeviceWeight>& s, std::array<const DeviceLinear*, P> parts, int M) {
  return s && std::any_of(parts.begin(), parts.end(),
                          [M](const DeviceLinear* p) { return p->path_for(M) == DeviceLinear::Path::gemv; });
}

}  // namespace

DeviceLayer::DeviceLayer(const LayerWeights& L, const ModelConfig& c, bool stack_linears)
    : attn_norm(norm(L.attn_norm)), ffn_norm(norm(L.ffn_norm)),
      q_norm(c.qk_norm ? norm(L.q_norm) : DeviceBuffer<float>()),
      k_norm(c.qk_norm ? norm(L.k_norm) : DeviceBuffer<float>()),
      qkv_stack(stack({&L.q, &L.k, &L.v}, stack_linears,
                      [&](const std::vector<const PackedTensor*>& w) {
                        return upload_stacked(w, L.q.name, rope_fuses(L, c) ? c.head_dim : 0);
                      })),
      // a bias would have to be added before the fused SiLU: such layers run unfused
      gate_up_pair(stack({&L.gate, &L.up}, stack_linears && L.gate.bias.empty() && L.up.bias.empty(),
                         [&](const std::vector<const PackedTensor*>& w) { return upload_silu_pair(*w[0], *w[1], L.gate.name); })),
      q(linear(L.q, qkv_stack)), k(linear(L.k, qkv_stack)), v(linear(L.v, qkv_stack)), o(linear(L.o, std::nullopt)),
      gate(linear(L.gate, gate_up_pair)), up(linear(L.up, gate_up_pair)), down(linear(L.down, std::nullopt)) {}

bool DeviceLayer::rope_store_fuses(int M) const {
  return qkv_stack && qkv_stack->rope_head_dim && stack_runs(qkv_stack, std::array<const DeviceLinear*, 3>{&q, &k, &v}, M);
}

void DeviceLayer::run_qkv(const uint16_t* x, int M, uint16_t* yq, uint16_t* yk, uint16_t* yv, const LinearExec& ex,
                          const RopeStore* rope) const {
  const std::array<const DeviceLinear*, 3> parts{&q, &k, &v};
  const std::array<uint16_t*, 3> ys{yq, yk, yv};
  if (rope) {
    if (!rope_store_fuses(M)) throw Error(fmt::format("DeviceLayer::run_qkv: '{}' cannot apply RoPE at {} rows", q.name(), M));
    for (int m0 = 0; m0 < M; m0 += 16) {  // one launch per 16 rows, as run_gemv
      RopeStore at = *rope;
      at.slot += m0, at.pos += m0;
      linear_rope_store(x + int64_t(m0) * q.cols(), std::min(16, M - m0), *qkv_stack, yq + int64_t(m0) * q.rows(), at,
                        ex.stream);
    }
    return;  // no biases: the stack is in pair order only where rope_fuses
  }
  if (stack_runs(qkv_stack, parts, M)) {
    run_gemv<3>(*qkv_stack, x, M, ys, {q.rows(), k.rows(), v.rows()}, ex.stream);
  } else if (const uint16_t* w16 = fp16_matrix(qkv_stack)) {  // plain float parts: in the stack only
    ex.cublas->gemm(x, w16, ex.stack_out, M, int(qkv_stack->N), int(q.cols()), ex.stream);
    ops::split_columns(ex.stack_out, M, int(q.rows()), int(k.rows()), int(v.rows()), yq, yk, yv, ex.stream,
                       qkv_stack->rope_head_dim);
  } else {
    for (size_t i = 0; i < 3; ++i) parts[i]->run(x, M, ys[i], ex);
    return;
  }
  for (size_t i = 0; i < 3; ++i) parts[i]->add_bias(ys[i], M, ex.stream);
}

void DeviceLayer::run_swiglu(const uint16_t* x, int M, uint16_t* ygate, uint16_t* yup, const LinearExec& ex) const {
  if (stack_runs(gate_up_pair, std::array<const DeviceLinear*, 2>{&gate, &up}, M))
    return run_gemv<1>(*gate_up_pair, x, M, {ygate}, {gate.rows()}, ex.stream);
  if (const uint16_t* w16 = fp16_matrix(gate_up_pair)) {  // one cuBLAS call over the interleaved rows, then SiLU
    ex.cublas->gemm(x, w16, ex.stack_out, M, int(2 * gate.rows()), int(gate.cols()), ex.stream);
    return ops::silu_mul_pairs(ex.stack_out, M, int(gate.rows()), ygate, ex.stream);
  }
  gate.run(x, M, ygate, ex);
  up.run(x, M, yup, ex);
  ops::silu_mul(ygate, yup, int64_t(M) * gate.rows(), ygate, ex.stream);
}

bool DeviceLayer::ffn_norm_fuses(int M) const {
  return stack_runs(gate_up_pair, std::array<const DeviceLinear*, 2>{&gate, &up}, M) &&
         linear_fuses_rmsnorm(*gate_up_pair, M);
}

void DeviceLayer::run_swiglu_normed(const float* res, const uint16_t* delta, float eps, int M, uint16_t* ygate,
                                    uint16_t* xn, const LinearExec& ex) const {
  // linear_rmsnorm is right whether or not the kernel fuses (else the norm goes to xn first); the
  // caller asked ffn_norm_fuses, which also says that the pair runs at M.
  if (!gate_up_pair) throw Error("DeviceLayer::run_swiglu_normed: gate and up are not stacked as a silu pair");
  linear_rmsnorm({res, delta, ffn_norm.get(), eps, xn}, M, *gate_up_pair, {ygate}, ex.stream);
}

size_t DeviceLayer::decode_bytes() const {
  size_t b = attn_norm.bytes() + ffn_norm.bytes() + q_norm.bytes() + k_norm.bytes();
  for (const DeviceLinear* l : {&q, &k, &v, &o, &gate, &up, &down}) b += l->decode_bytes();
  for (const auto* s : {&qkv_stack, &gate_up_pair})
    if (*s) b += (*s)->bytes();
  return b;
}

size_t DeviceLayer::device_bytes() const {
  size_t b = attn_norm.bytes() + ffn_norm.bytes() + q_norm.bytes() + k_norm.bytes();
  for (const DeviceLinear* l : {&q, &k, &v, &o, &gate, &up, &down}) b += l->device_bytes();
  for (const auto* s : {&qkv_stack, &gate_up_pair})
    if (*s) b += (*s)->bytes() + (*s)->mma_bytes;
  return b;
}

}  // namespace nibble::cuda

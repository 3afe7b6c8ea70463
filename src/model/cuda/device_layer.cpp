#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "model/cuda/device_model_impl.h"
#include "model/cuda/fp16_weights.h"
#include "model/cuda/upload_choice.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

DeviceBuffer<float> norm(const std::vector<float>& w) { return DeviceBuffer<float>(w); }

// Plain float parts stacked as one FP16 weight (rows after rows), for one cuBLAS call; empty when
// a part is quantized.
DeviceBuffer<uint16_t> stack_fp16(std::initializer_list<const LinearWeight*> parts, bool enabled) {
  if (!enabled) return {};
  std::vector<uint16_t> all;
  for (const LinearWeight* p : parts) {
    if (!is_plain_float(p->w.format)) return {};
    const std::vector<uint16_t> w = dequantize_fp16(p->w, p->name);
    all.insert(all.end(), w.begin(), w.end());
  }
  return DeviceBuffer<uint16_t>(all);
}

DeviceLinear linear(const LinearWeight& lw, const std::optional<DeviceWeight>& gemv_stack,
                    const DeviceBuffer<uint16_t>& fp16_stack) {
  using Held = DeviceLinear::Held;
  const Held held = !fp16_stack.empty() ? Held::fp16_in_layer : gemv_stack ? Held::gemv_in_layer : Held::here;
  return DeviceLinear(lw.w, lw.bias, lw.name, held);
}

// upload() of the parts as one GEMV weight, or nothing where a part's format or shape has no GEMV
// kernel (each part then uploads and runs on its own). CUDA failures are not swallowed.
template <class Upload>
std::optional<DeviceWeight> stack(std::initializer_list<const LinearWeight*> parts, bool enabled, const Upload& upload) {
  if (!enabled) return std::nullopt;
  for (const LinearWeight* p : parts)
    if (!has_kernel(p->w.format)) return std::nullopt;
  std::optional<DeviceWeight> out;
  std::string why;  // a stack no kernel takes: the parts run alone, nothing to report
  try_upload(out, why, upload);
  return out;
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
                      [&] { return upload_stacked({&L.q.w, &L.k.w, &L.v.w}, L.q.name); })),
      // a bias would have to be added before the fused SiLU: such layers run unfused
      gate_up_pair(stack({&L.gate, &L.up}, stack_linears && L.gate.bias.empty() && L.up.bias.empty(),
                         [&] { return upload_silu_pair(L.gate.w, L.up.w, L.gate.name); })),
      qkv16(stack_fp16({&L.q, &L.k, &L.v}, stack_linears)),
      gate_up16(stack_fp16({&L.gate, &L.up}, stack_linears && L.gate.bias.empty() && L.up.bias.empty())),
      q(linear(L.q, qkv_stack, qkv16)), k(linear(L.k, qkv_stack, qkv16)), v(linear(L.v, qkv_stack, qkv16)),
      o(linear(L.o, std::nullopt, {})), gate(linear(L.gate, gate_up_pair, gate_up16)),
      up(linear(L.up, gate_up_pair, gate_up16)), down(linear(L.down, std::nullopt, {})) {}

void DeviceLayer::run_qkv(const uint16_t* x, int M, uint16_t* yq, uint16_t* yk, uint16_t* yv,
                          const LinearExec& ex) const {
  const std::array<const DeviceLinear*, 3> parts{&q, &k, &v};
  if (!qkv16.empty()) {  // one cuBLAS call, then the columns split
    ex.cublas->gemm(x, qkv16.get(), ex.stack_out, M, int(q.rows() + k.rows() + v.rows()), int(q.cols()), ex.stream);
    ops::split_columns(ex.stack_out, M, int(q.rows()), int(k.rows()), int(v.rows()), yq, yk, yv, ex.stream);
    for (size_t i = 0; i < 3; ++i) parts[i]->add_bias(std::array{yq, yk, yv}[i], M, ex.stream);
    return;
  }
  if (stack_runs(qkv_stack, parts, M)) {
    const std::array<uint16_t*, 3> ys{yq, yk, yv};
    run_gemv<3>(*qkv_stack, x, M, ys, {q.rows(), k.rows(), v.rows()}, ex.stream);
    for (size_t i = 0; i < 3; ++i) parts[i]->add_bias(ys[i], M, ex.stream);
    return;
  }
  q.run(x, M, yq, ex);
  k.run(x, M, yk, ex);
  v.run(x, M, yv, ex);
}

void DeviceLayer::run_swiglu(const uint16_t* x, int M, uint16_t* ygate, uint16_t* yup, const LinearExec& ex) const {
  if (!gate_up16.empty()) {  // one cuBLAS call, then SiLU over its two halves
    ex.cublas->gemm(x, gate_up16.get(), ex.stack_out, M, int(2 * gate.rows()), int(gate.cols()), ex.stream);
    return ops::silu_mul_rows(ex.stack_out, M, int(gate.rows()), ygate, ex.stream);
  }
  if (stack_runs(gate_up_pair, std::array<const DeviceLinear*, 2>{&gate, &up}, M))
    return run_gemv<1>(*gate_up_pair, x, M, {ygate}, {gate.rows()}, ex.stream);
  gate.run(x, M, ygate, ex);
  up.run(x, M, yup, ex);
  ops::silu_mul(ygate, yup, int64_t(M) * gate.rows(), ygate, ex.stream);
}

size_t DeviceLayer::decode_bytes() const {
  size_t b = attn_norm.bytes() + ffn_norm.bytes() + q_norm.bytes() + k_norm.bytes();
  for (const DeviceLinear* l : {&q, &k, &v, &o, &gate, &up, &down}) b += l->decode_bytes();
  for (const auto* s : {&qkv_stack, &gate_up_pair})
    if (*s) b += (*s)->bytes();
  return b + qkv16.bytes() + gate_up16.bytes();
}

size_t DeviceLayer::device_bytes() const {
  size_t b = attn_norm.bytes() + ffn_norm.bytes() + q_norm.bytes() + k_norm.bytes();
  for (const DeviceLinear* l : {&q, &k, &v, &o, &gate, &up, &down}) b += l->device_bytes();
  for (const auto* s : {&qkv_stack, &gate_up_pair})
    if (*s) b += (*s)->bytes() + (*s)->qweight_mma_bytes;
  return b + qkv16.bytes() + gate_up16.bytes();
}

}  // namespace nibble::cuda

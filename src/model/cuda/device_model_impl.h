#pragma once
// What a DeviceModel holds on the device: FP16 embedding table, per layer the norms (FP32) and
// seven DeviceLinears, the final norm and the output layer.
#include <optional>
#include <vector>

#include "model/cuda/device_buffer.h"
#include "model/cuda/device_linear.h"
#include "model/weights.h"
#include "nibble/cuda/runtime.h"

namespace nibble::cuda {

struct DeviceLayer {
  // stack: hold q/k/v as one stacked GEMV weight and gate/up as one silu pair (one launch each
  // where M takes the GEMV, SwiGLU fused), where the format has a GEMV kernel for the shapes. Plain
  // float parts are held only there, as FP16; above the GEMV's rows one cuBLAS call reads the
  // stack, then a split / the SiLU over the interleaved pairs.
  DeviceLayer(const LayerWeights& L, const ModelConfig& c, bool stack);
  DeviceBuffer<float> attn_norm, ffn_norm, q_norm, k_norm;  // q_norm / k_norm: Qwen3 only
  std::optional<DeviceWeight> qkv_stack, gate_up_pair;      // empty: each part runs alone
  DeviceLinear q, k, v, o, gate, up, down;
  // Whether run_qkv can take a RopeStore at M rows: the stack is in RoPE pair order (no q/k norms
  // or biases) and the stacked GEMV runs at M.
  bool rope_store_fuses(int M) const;
  // yq, yk, yv = x · q, k, v^T (+ biases). With rope (an FP16 cache; rope_store_fuses(M) must
  // hold): linear_rope_store instead, q rotated into yq, k and v into the cache, yk and yv untouched.
  void run_qkv(const uint16_t* x, int M, uint16_t* yq, uint16_t* yk, uint16_t* yv, const LinearExec& ex,
               const RopeStore* rope = nullptr) const;
  // ygate = silu(x · gate^T) * (x · up^T); yup is scratch.
  void run_swiglu(const uint16_t* x, int M, uint16_t* ygate, uint16_t* yup, const LinearExec& ex) const;
  // Whether the FFN norm can run inside the gate/up GEMV at M rows (linear_fuses_rmsnorm on the
  // silu pair), and that run: ygate = SwiGLU of fp16(rmsnorm(res + delta) * ffn_norm), res (FP32)
  // not written; xn is scratch (the pair must exist: ask ffn_norm_fuses first).
  bool ffn_norm_fuses(int M) const;
  void run_swiglu_normed(const float* res, const uint16_t* delta, float eps, int M, uint16_t* ygate, uint16_t* xn,
                         const LinearExec& ex) const;
  size_t decode_bytes() const;
  size_t device_bytes() const;
};

struct DeviceModel::Impl {
  const Model* model = nullptr;
  const ModelConfig* cfg = nullptr;
  int64_t vocab = 0;
  DeviceBuffer<uint16_t> embed;  // FP16 [vocab, hidden], decoded on the host
  std::vector<DeviceLayer> layers;
  DeviceBuffer<float> final_norm;
  std::optional<DeviceLinear> head_quantized;  // a quantized output layer
  DeviceBuffer<uint16_t> head_fp16;            // an unquantized lm_head; empty when tied to embed
  size_t weight_bytes = 0, device_bytes = 0;

  // FP32 logits [M, vocab] of the final-normed rows xn [M, hidden]. A quantized head writes FP16
  // logits into logits16 ([M, vocab]) first.
  void logits(const uint16_t* xn, int M, float* out, uint16_t* logits16, const LinearExec& ex) const;
};

}  // namespace nibble::cuda

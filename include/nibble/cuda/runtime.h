#pragma once
// The CUDA backend of the model runtime: a Model's weights uploaded once (DeviceModel) and a
// batch of sequences decoding together over one KV cache (Batch). Same model code and numbers as
// the CPU Session (nibble/model.h), with FP16 activations, an FP32 residual stream and FP32
// logits. Linear layers go through the kernel dispatcher (DeviceLinear: GEMV for few rows, GEMM /
// cuBLAS for many); decode steps are captured as CUDA graphs. Built only with NIBBLE_HAVE_CUDA.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nibble/cuda/ops.h"
#include "nibble/format.h"
#include "nibble/model.h"
#include "nibble/sampler.h"
#include "nibble/sequence.h"

namespace nibble::cuda {

// One linear layer on the device in any nibble format, for any number of rows M >= 1
// (src/model/cuda/device_linear.h): formats with a GEMV kernel use it for M <= the format's
// GEMV/GEMM crossover (gemm_crossover_m, 16 for now) and the tensor-core GEMM (or the GEMV in
// chunks of 16 rows) above; a format with only a GEMM uses it for every M; fp16 / bf16 / fp32
// weights, and any layer no kernel takes, are held as FP16 and run through cuBLAS.
// y = x · W^T (+ bias), x FP16 [M, K], y FP16 [M, N].
class DeviceLinear;

struct DeviceModelOptions {
  bool progress = false;      // progress bar while uploading
  bool stack_linears = true;  // q/k/v and gate/up each as one GEMV launch (false: one per weight)
};

class DeviceModel {
 public:
  // Uploads every weight of m (m must outlive this). A linear whose format has no kernel for its
  // shape runs dequantized to FP16 through cuBLAS (one warning line per format on stderr). Throws
  // nibble::Error naming the layer when the model uses an activation format (fake-quantized
  // activations run on the CPU only), when head_dim is not 64 or 128, or when the weights do not
  // fit in device memory.
  explicit DeviceModel(const Model& m, const DeviceModelOptions& = {});
  ~DeviceModel();
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  const Model& model() const;
  // Weight bytes one decode step reads (each linear's M = 1 path, norms, the output layer; not
  // the embedding table, of which a step reads B rows).
  size_t weight_bytes() const;
  // Device bytes the weights occupy (codes held in both the GEMV and the GEMM layout where a
  // format has both, the FP16 embedding table included).
  size_t device_bytes() const;
  struct Impl;
  const Impl& impl() const { return *p_; }

 private:
  std::unique_ptr<Impl> p_;
};

// The device KV cache of a LoadOptions::kv_cache name: "" or "fp16" -> FP16, "fp8-e4m3" -> E4M3
// codes with FP32 row scales. Throws nibble::Error for the formats the CPU alone holds.
ops::KvType kv_type(const std::string& kv_cache);

struct BatchOptions {
  int max_batch = 1;        // sequences (KV-cache slots)
  int max_context = 0;      // tokens per slot; 0: the model's max positions
  bool cuda_graphs = true;  // capture decode steps as CUDA graphs
  ops::KvType kv = ops::KvType::fp16;  // the KV cache's element type (kv_type(LoadOptions::kv_cache))
};

// What to do with a decode step's logits on the device.
struct SampleParams {
  float temperature = 0;  // <= 0: greedy
  float top_p = 1;
  float u = 0;            // the uniform draw in [0, 1) for this step (host RNG)
  int top_k = 0;          // 0: off
  float min_p = 0;        // 0: off
};

// ReSET's rule for one row, applied on the device (Batch::sample_by_entropy): temperature t_high
// when the row's entropy >= threshold (ResetController::next_threshold()), else t_low.
struct EntropyRule {
  double threshold = 0;
  float t_low = 0, t_high = 0;
  float top_p = 1;
  float u = 0;
};
// The rule of `ctl` for its next token, with the uniform draw u in [0, 1).
EntropyRule entropy_rule(const ResetController& ctl, float u);

// Device time of one kind of op in a profiled step (Batch::profile_step).
struct OpTime {
  std::string op;  // "q", "attention", "lm_head", ...
  int calls = 0;   // launches of it in the step (one per layer for most)
  double us = 0;   // summed over the step
};

class Batch {
 public:
  // Allocates the KV cache (FP16 or E4M3: opt.kv) and scratch for max_batch x max_context. Throws
  // nibble::Error saying how many bytes it needs and how many are free when it does not fit.
  Batch(const DeviceModel& dm, const BatchOptions& opt);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // KV-cache bytes for a batch of this shape.
  static size_t kv_cache_bytes(const ModelConfig& c, int max_batch, int max_context,
                               ops::KvType type = ops::KvType::fp16);
  // The largest max_batch whose cache fits in the free device memory (keeping a margin).
  static int max_batch_that_fits(const DeviceModel& dm, int max_context, ops::KvType kv = ops::KvType::fp16);

  // Appends tokens to one slot (a prefill, chunked internally); FP32 logits on the host for the
  // last token, or for every token when all_logits. Checks ids and context like Session::forward.
  // Without all_logits, the last token's logits also stay on the device as a step of one row, for
  // logits() / entropies() / sample() (so generation can sample its first token there).
  std::vector<float> prefill(int slot, std::span<const int32_t> tokens, bool all_logits = false);
  // For perplexity: appends tokens to a slot and returns, for i < n - 1,
  // -log p(tokens[i + 1] | ..tokens[i]) computed on the device (no logits copied back).
  std::vector<float> prefill_nll(int slot, std::span<const int32_t> tokens);
  // One decode step: tokens[i] is appended to slots[i] (distinct slots, B = tokens.size() <=
  // max_batch). The logits [B, V] stay on the device for the calls below.
  void step(std::span<const int> slots, std::span<const int32_t> tokens);
  std::vector<float> logits() const;     // FP32 [B, V] of the last step, copied to the host
  std::vector<float> entropies() const;  // per row of the last step, in nats (ReSET's signal)
  // The next token per row of the last step, chosen on the device (greedy, or temperature with
  // top-k, top-p and min-p).
  std::vector<int32_t> sample(std::span<const SampleParams> params);
  // ReSET without a round trip to the host between the entropy and the draw: per row the entropy
  // on the device, the temperature by `rules`, then temperature + top-p sampling. Returns the
  // tokens; *entropies gets the entropies the rule used (for ResetController::decide_entropy,
  // which then makes the same choice, and accept()).
  std::vector<int32_t> sample_by_entropy(std::span<const EntropyRule> rules, std::vector<float>* entropies);
  // step() then logits().
  std::vector<float> decode(std::span<const int> slots, std::span<const int32_t> tokens);
  // step(), timed op by op (no graph; the kernels run back to back once the step is queued):
  // where a decode step's time goes, per op name in order of first launch.
  std::vector<OpTime> profile_step(std::span<const int> slots, std::span<const int32_t> tokens);
  // Diagnostics (`bench e2e --in-step`): later decode steps leave these ops out of every layer
  // (names from decode_op_names()), so that a step's time without an op is that op's cost inside
  // the captured graph. The outputs are then meaningless: timing only. Empty: every op runs (the
  // default). Throws nibble::Error naming an unknown op.
  void skip_decode_ops(std::span<const std::string> ops);
  // Whether one-row decode steps compute the FFN norm inside the gate/up GEMV where the format
  // allows (DeviceLayer::ffn_norm_fuses; default on). Off: a kernel of its own, the same bits. For
  // comparisons; the captured graphs are dropped.
  void set_fused_ffn_norm(bool on);
  // Whether decode steps apply RoPE and store k and v inside the stacked q/k/v GEMV where the
  // layer allows (no q/k norms or biases, an FP16 KV cache; default on, NIBBLE_FUSE_ROPE=0 off).
  // Off: ops::qk_norm_rope_store after it, the same bits. For comparisons; the captured graphs are
  // dropped.
  void set_fused_rope_store(bool on);
  // Whether a decode step of `rows` rows does so in every layer.
  bool fuses_rope_store(int rows) const;
  // Whether one-row decode steps run every layer in one kernel (the whole-stack decode kernel,
  // src/kernels/cuda/decode_stack.cuh) where the model allows. Experimental and slower than a kernel
  // per op today (docs/perf/decode-stack-2026-12-02.md): off by default, NIBBLE_DECODE_STACK=1 on.
  // ctas > 0 runs it on that many CTAs instead of one per SM (tests: more work per CTA). The
  // captured graphs are dropped.
  void set_decode_stack(bool on, int ctas = 0);
  // Whether a decode step of `rows` rows runs that kernel; why_not (if given) gets the reason when not.
  bool runs_decode_stack(int rows, std::string* why_not = nullptr) const;
  // A decode step's ops per layer, in order: qkv, qk_norm_rope_store, attention, o, ffn_norm
  // (residual add + RMSNorm), gate_up_silu, down, next_norm (residual add + the next norm).
  static const std::vector<std::string>& decode_op_names();

  void reset(int slot);  // position 0
  int position(int slot) const;
  int max_batch() const;
  int max_context() const;
  cudaStream_t stream() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> p_;
};

// A nibble::Sequence on one slot of its own Batch (for `--device cuda` in ppl / generate /
// compare), with the KV cache the model was loaded for (LoadOptions::kv_cache).
std::unique_ptr<Sequence> make_sequence(const DeviceModel& dm, int max_context);

}  // namespace nibble::cuda

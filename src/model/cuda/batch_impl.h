#pragma once
// A Batch's state: the KV cache of every slot (FP16 or E4M3), the RoPE table, scratch activations for the
// largest step, per-slot positions on the host, the decode graphs.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/cuda/decode_graphs.h"
#include "model/cuda/decode_stack.h"
#include "model/cuda/device_buffer.h"
#include "model/cuda/device_model_impl.h"
#include "model/cuda/step_profiler.h"
#include "nibble/cuda/ops.h"
#include "nibble/cuda/runtime.h"

namespace nibble::cuda {

// Prefills run in chunks of at most this many tokens (the scratch is sized for it).
inline constexpr int kPrefillChunk = 512;

// Scratch bytes of a step of `rows` tokens (activations, logits, per-row inputs).
size_t scratch_bytes(const DeviceModel::Impl& m, int rows);

struct Batch::Impl {
  Impl(const DeviceModel::Impl& dm, const BatchOptions& opt);
  ~Impl();

  const DeviceModel::Impl& m;
  const ModelConfig& c;
  int max_batch, max_ctx, max_rows;  // max_rows: the largest step (a prefill chunk or a decode)
  bool use_graphs;
  cudaStream_t stream = nullptr;
  GemmWorkspace prefill_ws, decode_ws;  // decode_ws is captured in graphs: prefills never grow it
  CublasFp16 cublas;
  ops::KvType kv_type;                  // the model's KV-cache format (LoadOptions::kv_cache)
  DeviceBuffer<uint8_t> kv;             // per layer: K, V ([max_batch][nkv][max_ctx][d]), E4M3: scales
  DeviceBuffer<float> rope;             // [max_ctx][d]: d/2 cosines then d/2 sines per position
  DeviceBuffer<float> x;                // FP32 residual stream [rows, H]
  DeviceBuffer<uint16_t> xn, q, k, v, att, tmp, gate, up;
  DeviceBuffer<uint16_t> o_out;         // [max_batch, H]: o's output where the FFN norm is fused into gate/up
  bool fuse_ffn_norm = true;            // Batch::set_fused_ffn_norm
  bool fuse_rope_store = true;          // Batch::set_fused_rope_store (NIBBLE_FUSE_ROPE=0: off)
  DeviceBuffer<uint16_t> stack_out;     // [rows, widest stack] (LinearExec::stack_out)
  // The whole-stack decode kernel's plan (one-row steps), built when first turned on where the model
  // allows; else why not.
  std::optional<DecodeStack> decode_stack;
  std::string decode_stack_why;
  bool use_decode_stack = false;        // Batch::set_decode_stack (NIBBLE_DECODE_STACK=1: on)
  DeviceBuffer<float> logits;           // [rows, V]
  DeviceBuffer<uint16_t> logits16;      // [rows, V], for a quantized output layer only
  // A step's per-row inputs, staged in pinned memory and copied in one transfer: [3][rows] =
  // token ids, slots, positions; `ids`, `slot`, `pos` point into rows_d.
  PinnedBuffer<int32_t> rows_h;
  DeviceBuffer<int32_t> rows_d;
  int32_t *ids = nullptr, *slot = nullptr, *pos = nullptr;
  cudaEvent_t rows_copied = nullptr;  // rows_h may be rewritten once this has passed
  DeviceBuffer<int32_t> targets;         // [rows]
  DeviceBuffer<float> nll;               // [rows]
  // Sampling: the rows' inputs staged in pinned memory and copied in one transfer; the tokens
  // drawn and the entropies come back into pinned memory, then one synchronization.
  PinnedBuffer<ops::SampleRow> sample_h;
  DeviceBuffer<ops::SampleRow> sample_d;
  PinnedBuffer<int32_t> sampled_h;
  PinnedBuffer<float> entropy_h;
  DeviceBuffer<int32_t> sampled;          // [rows]
  DeviceBuffer<float> entropy;           // [rows]
  DeviceBuffer<uint8_t> attn_ws, logits_ws;  // logits_ws: sampling's and the entropies' scratch
  std::vector<int> positions;           // per slot
  // Decode attention's max_pos_hint for the current step: the rows' largest position rounded up
  // to 256 * 2^k - 1 (at most max_ctx - 1), so that attention's grid fits the context in use, not
  // the whole cache; the decode graphs are kept per (rows, attn_hint).
  int attn_hint = 0;
  int last_rows = 0;                    // rows of logits the last step left (0: none)
  DecodeGraphs graphs;
  StepProfiler* profiler = nullptr;     // set during profile_step: forward() marks each op
  std::vector<std::string> skipped_ops;  // Batch::skip_decode_ops: decode ops left out (timing only)

  void mark(const char* op) const {
    if (profiler) profiler->mark(op);
  }
  // Whether forward() runs op (one of Batch::decode_op_names()) in this pass.
  bool runs(const char* op, bool decode) const {
    return !decode || std::find(skipped_ops.begin(), skipped_ops.end(), op) == skipped_ops.end();
  }

  ops::KvCache kv_cache(int layer) const;
  // Whether a decode step of `rows` rows applies RoPE and stores k and v inside L's q/k/v GEMV.
  bool rope_store_fused(const DeviceLayer& L, int rows) const;
  // use_decode_stack on, the plan built (where the model allows) for `ctas` CTAs (0: one per SM).
  void enable_decode_stack(int ctas);
  // Whether a decode step of `rows` rows runs the whole-stack kernel (not while profiling or
  // leaving ops out: those time the per-op kernels).
  bool stack_runs(int rows) const {
    return rows == 1 && decode_stack && use_decode_stack && !profiler && skipped_ops.empty();
  }
  void check_slot(int s, const char* what) const;
  void check_tokens(std::span<const int32_t> tokens, const char* what) const;
  // Copies the per-row token ids, slots and positions of a step of n rows into ids / slot / pos
  // (asynchronously; waits only for the previous step's copy to have left rows_h).
  void upload_rows(std::span<const int32_t> ids_h, std::span<const int32_t> slot_h, std::span<const int32_t> pos_h);
  // The forward pass of T tokens whose rows are uploaded: a prefill chunk of one slot starting at
  // pos0 (decode = false), or one token per row (decode = true). Leaves FP32 logits of the last
  // n_out rows in `logits` (n_out may be 0).
  void forward(int T, bool decode, int prefill_slot, int pos0, int n_out, GemmWorkspace& ws);
  void decode_step(int B);  // forward(B, decode = true) through a graph or directly
  void copy_to_host(void* dst, const void* src, size_t bytes) const;
};

}  // namespace nibble::cuda

#pragma once
// A Llama-family causal LM on the CPU: Model holds the (possibly quantized) weights and is
// immutable after load, so any number of Sessions (one sequence each: KV cache + position) can
// share it.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nibble/format.h"
#include "nibble/model_config.h"
#include "nibble/sequence.h"
#include "nibble/tokenizer.h"

namespace nibble {

struct LoadOptions {
  // "" = as stored (bf16 tensors stay bf16 via the exact "bf16" format, f32 stays fp32, a
  // nibble-quantized directory keeps its packed weights); else every linear layer is quantized to
  // this registry format on load.
  std::string weight_format;
  QuantOptions quant;  // block / special-value pair for weight_format (quant.name is ignored)
  // "" = FP32 activations; else the input row of every quantized linear is quantized and
  // dequantized per token with this format ("nvfp4", "nvfp4-razer-act", "fp8-e4m3", ...).
  // For a nibble-quantized directory, "" means: use the activation_format it was saved with.
  std::string act_format;
  // "" = the KV cache keeps K and V as computed (FP32 on the CPU, FP16 on the GPU); else each
  // (token, KV head) row of head_dim values is quantized with this registry format as it is
  // stored, in blocks of the format's default size (of head_dim where that does not divide it).
  // The GPU runtime takes "fp16" and "fp8-e4m3" (E4M3 codes + one FP32 scale per row); the CPU
  // any format (the accuracy lab for KV-cache formats). Not saved with a quantized model.
  std::string kv_cache;
  bool quantize_embeddings = false;  // also quantize model.embed_tokens (else kept as stored)
  bool quantize_lm_head = false;     // also quantize lm_head (or the tied embeddings used as it)
  std::filesystem::path tokenizer;   // llama2.c: tokenizer.bin when not beside the .bin checkpoint
  bool progress = false;             // progress bar while loading / quantizing
};

struct ModelWeights;  // src/model/weights.h

class Model {
 public:
  // A Hugging Face directory (plain, or written by save_quantized) or a llama2.c .bin checkpoint.
  static std::unique_ptr<Model> load(const std::filesystem::path& path, const LoadOptions& = {});
  ~Model();

  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  const LoadOptions& options() const;        // as effectively used (act_format resolved)
  size_t weight_bytes() const;               // bytes of all weights as stored in memory
  // Relative MSE sum((W_q - W)^2) / sum(W^2) over all weights quantized on load (0 if none).
  double weight_rel_mse() const;
  // Linears a nestedfp format could not hold (some |w| >= 1.875), kept as stored instead.
  const std::vector<std::string>& ineligible_layers() const;
  // Writes a nibble-quantized HF directory: config.json (+ "quantization_config"), tokenizer
  // files copied from the source, model.safetensors with NAME.qweight / .scales / ... per linear.
  void save_quantized(const std::filesystem::path& out_dir) const;

  const ModelWeights& weights() const { return *w_; }

 private:
  Model();
  std::unique_ptr<ModelWeights> w_;
};

struct SessionState;  // src/model/session_state.h

class Session final : public Sequence {
 public:
  Session(const Model& m, int max_context);
  ~Session() override;
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Appends tokens (batched prefill) and returns logits [n_out x vocab]: for the last token only,
  // or for every given token when all_logits. Throws nibble::Error if the context would overflow
  // or a token id is out of range.
  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits = false) override;
  int position() const override;
  int max_context() const override;
  void reset() override;  // empty the cache (position 0); keeps the buffers
  const Model& model() const { return *m_; }

 private:
  const Model* m_;
  std::unique_ptr<SessionState> s_;
};

}  // namespace nibble

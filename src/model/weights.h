#pragma once
// The in-memory weights of a Model (what Model::load builds and Session::forward reads).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nibble/format.h"
#include "nibble/model.h"

namespace nibble {

struct LinearWeight {
  std::string name;          // HF tensor name without ".weight", e.g. model.layers.0.mlp.up_proj
  PackedTensor w;            // [out, in]
  std::vector<float> bias;   // empty if none
  bool quantized = false;    // quantized (on load or as saved)
  bool act_quant = false;    // its input is quantized per token when an activation format is set
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [hidden]
  std::vector<float> q_norm, k_norm;       // [head_dim], Qwen3 only
  LinearWeight q, k, v, o, gate, up, down;
};

struct ModelWeights {
  ModelConfig cfg;
  std::unique_ptr<Tokenizer> tokenizer;
  LoadOptions opts;                    // as effectively used
  std::filesystem::path source;        // the directory / file loaded (tokenizer files to copy)
  std::filesystem::path tokenizer_file;  // llama2.c: the tokenizer.bin used
  PackedTensor embed;                  // [vocab, hidden]; rows decoded on lookup
  std::vector<float> final_norm;       // [hidden]
  std::optional<LinearWeight> lm_head; // absent: tied, the embedding matrix is the output layer
  bool embed_quantized = false;
  std::vector<LayerWeights> layers;
  const FormatInfo* act_format = nullptr;
  const FormatInfo* kv_format = nullptr;  // LoadOptions::kv_cache resolved (null: unquantized)
  int kv_block = 0;                       // its block along head_dim (0: the format's default)
  double sq_err = 0, sq_ref = 0;       // accumulated by quantize-on-load, for weight_rel_mse
  std::vector<std::string> nestedfp_ineligible;  // linears kept as stored by a nestedfp format

  const PackedTensor& output_weight() const { return lm_head ? lm_head->w : embed; }
  bool output_quantized() const { return lm_head ? lm_head->quantized : embed_quantized; }
};

}  // namespace nibble

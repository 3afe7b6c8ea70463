#pragma once
// Karpathy's llama2.c checkpoints (legacy "v0" .bin): a header of 7 int32
//   dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
// (vocab_size < 0 means the classifier is stored separately, i.e. not tied to the embedding),
// then fp32 tensors: token embedding, all layers' attention norms, wq, wk, wv, wo, ffn norms,
// w1, w2, w3, the final norm, the RoPE tables (freq_cis_real/imag, skipped), and the classifier
// when unshared. The file length must match the header exactly.
//
// The result uses Hugging Face Llama names and shapes ([out, in] weights):
//   model.embed_tokens.weight, model.layers.{i}.input_layernorm.weight,
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight, model.layers.{i}.post_attention_layernorm.weight,
//   model.layers.{i}.mlp.{gate,down,up}_proj.weight (w1, w2, w3), model.norm.weight,
//   lm_head.weight (only when unshared; otherwise config.tie_word_embeddings is true).
//
// RoPE: llama2.c rotates interleaved pairs (2i, 2i+1) of each head; Hugging Face Llama rotates
// halves (i, i + head_dim/2) with the same frequency for pair i. The loader permutes the rows of
// q_proj and k_proj inside every head (new row s*head_dim/2 + i = old row 2i + s, as HF's
// convert script does), so the ordinary HF-style forward pass computes exactly llama2.c's model:
// no interleaved-RoPE flag exists or is needed.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nibble/model_config.h"

namespace nibble {

struct FloatTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct Llama2cModel {
  ModelConfig config;  // LlamaForCausalLM, rope theta 10000, eps 1e-5, float32, bos 1, eos 2
  std::map<std::string, FloatTensor> tensors;
};

// Reads and validates a v0 checkpoint; errors name the file and the field / tensor at fault.
Llama2cModel load_llama2c(const std::filesystem::path& path);

// The q/k row permutation described above, in place on a [n_heads * head_dim, cols] matrix.
void llama2c_permute_rope_rows(std::vector<float>& w, int n_heads, int head_dim, int64_t cols);

}  // namespace nibble

#include "model/build_weights.h"

#include <algorithm>
#include <exception>

#include "model/load_tensors.h"
#include "nibble/error.h"
#include "nibble/progress.h"

namespace nibble {
namespace {

struct Builder {
  const WeightSource& src;
  ModelWeights& w;

  const TensorView& tensor(const std::string& name) const {
    const TensorView* t = src.find(name);
    if (!t) throw Error(src.where + ": missing tensor " + name);
    return *t;
  }

  // A matrix kept as stored, or quantized to `format`; a packed one in the source wins.
  PackedTensor matrix(const std::string& base, int64_t rows, int64_t cols,
                      const std::string& format, bool& quantized) const {
    if (src.packed) {
      if (std::optional<PackedTensor> p = src.packed(base)) {
        if (p->rows != rows || p->cols != cols)
          throw Error(src.where + ": packed tensor " + base + " is [" + std::to_string(p->rows) +
                      ", " + std::to_string(p->cols) + "], expected [" + std::to_string(rows) +
                      ", " + std::to_string(cols) + "]");
        quantized = true;
        return std::move(*p);
      }
    }
    const TensorView& t = tensor(base + ".weight");
    check_shape(t, {rows, cols});
    const std::vector<float> data = t.to_float();
    std::string fmt = format;
    if (fmt.starts_with("nestedfp") && !nestedfp_eligible(data)) {
#pragma omp critical(nibble_build_weights)
      w.nestedfp_ineligible.push_back(base);  // FORMATS.md: ineligible layers stay unquantized
      fmt.clear();
    }
    quantized = !fmt.empty();
    return pack_matrix(data.data(), rows, cols, quantized ? fmt : stored_format(t), w.opts.quant,
                       t.name, quantized, w);
  }

  LinearWeight linear(const std::string& base, int64_t out, int64_t in, bool bias) const {
    LinearWeight lw;
    lw.name = base;
    lw.w = matrix(base, out, in, w.opts.weight_format, lw.quantized);
    if (bias) lw.bias = load_vector(tensor(base + ".bias"), out);
    // Activation quantization goes with weight quantization; on a model kept as stored it
    // applies to every decoder linear (NestedFP-ineligible layers stay on the unquantized path).
    lw.act_quant = lw.quantized || (w.opts.weight_format.empty() && !src.packed);
    return lw;
  }

  LayerWeights layer(int l) const {
    const ModelConfig& c = w.cfg;
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int64_t H = c.hidden_size, I = c.intermediate_size;
    const int64_t qd = int64_t(c.num_heads) * c.head_dim, kd = int64_t(c.num_kv_heads) * c.head_dim;
    LayerWeights L;
    L.attn_norm = load_vector(tensor(p + "input_layernorm.weight"), H);
    L.ffn_norm = load_vector(tensor(p + "post_attention_layernorm.weight"), H);
    if (c.qk_norm) {
      L.q_norm = load_vector(tensor(p + "self_attn.q_norm.weight"), c.head_dim);
      L.k_norm = load_vector(tensor(p + "self_attn.k_norm.weight"), c.head_dim);
    }
    const bool b = c.attention_bias;
    L.q = linear(p + "self_attn.q_proj", qd, H, b);
    L.k = linear(p + "self_attn.k_proj", kd, H, b);
    L.v = linear(p + "self_attn.v_proj", kd, H, b);
    L.o = linear(p + "self_attn.o_proj", H, qd, false);
    L.gate = linear(p + "mlp.gate_proj", I, H, false);
    L.up = linear(p + "mlp.up_proj", I, H, false);
    L.down = linear(p + "mlp.down_proj", H, I, false);
    return L;
  }
};

}  // namespace

void build_weights(const WeightSource& src, ModelWeights& w) {
  const ModelConfig& c = w.cfg;
  Builder b{src, w};
  const LoadOptions& o = w.opts;
  Progress bar(o.weight_format.empty() ? "load" : "quantize " + o.weight_format,
               c.num_layers + 2);
  if (!o.progress) bar.finish();
  w.embed = b.matrix("model.embed_tokens", c.vocab_size, c.hidden_size,
                     o.quantize_embeddings ? o.weight_format : "", w.embed_quantized);
  bar.add();
  // Layers load and quantize in parallel, one thread each (the quantizers' own parallel loops
  // then run serially inside): an 8B model has 32 layers, so this keeps every core busy.
  w.layers.assign(size_t(c.num_layers), LayerWeights{});
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1)
  for (int l = 0; l < c.num_layers; ++l) {
    try {
      w.layers[size_t(l)] = b.layer(l);
    } catch (...) {
#pragma omp critical(nibble_build_error)
      if (!error) error = std::current_exception();
    }
#pragma omp critical(nibble_build_progress)
    bar.add();
  }
  if (error) std::rethrow_exception(error);
  std::sort(w.nestedfp_ineligible.begin(), w.nestedfp_ineligible.end());
  w.final_norm = load_vector(b.tensor("model.norm.weight"), c.hidden_size);
  // Tied embeddings serve as the output layer unless it is to be quantized differently.
  const bool has_head = src.find("lm_head.weight") || (src.has_packed && src.has_packed("lm_head"));
  const bool head_differs = o.quantize_lm_head != o.quantize_embeddings && !o.weight_format.empty();
  w.lm_head.reset();
  if (!c.tie_word_embeddings || has_head || head_differs) {
    LinearWeight head;
    head.name = "lm_head";
    const std::string fmt = o.quantize_lm_head ? o.weight_format : "";
    if (has_head)
      head.w = b.matrix("lm_head", c.vocab_size, c.hidden_size, fmt, head.quantized);
    else  // tied: quantize a copy of the embedding matrix
      head.w = b.matrix("model.embed_tokens", c.vocab_size, c.hidden_size, fmt, head.quantized);
    head.act_quant = head.quantized;
    w.lm_head = std::move(head);
  }
  bar.add();
  bar.finish();
}

}  // namespace nibble

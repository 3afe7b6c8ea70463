// Model::load: picks the loader by what the path is, then resolves the activation format.
#include <filesystem>

#include "model/loaders.h"
#include "model/weights.h"
#include "nibble/error.h"

namespace nibble {

Model::Model() : w_(std::make_unique<ModelWeights>()) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::filesystem::path& path, const LoadOptions& opts) {
  std::unique_ptr<Model> m(new Model());
  ModelWeights& w = *m->w_;
  w.opts = opts;
  w.source = path;
  if (!opts.weight_format.empty()) find_format(opts.weight_format);  // fail before loading
  if (std::filesystem::is_directory(path)) {
    load_hf_directory(path, w);
  } else if (std::filesystem::is_regular_file(path)) {
    load_llama2c_checkpoint(path, w);
  } else {
    throw Error(path.string() + ": no such model directory or llama2.c checkpoint");
  }
  if (!w.opts.act_format.empty()) {
    w.act_format = &find_format(w.opts.act_format);
    if (!w.act_format->for_activations)
      throw Error("format \"" + w.opts.act_format + "\" cannot quantize activations online");
  }
  return m;
}

const ModelConfig& Model::config() const { return w_->cfg; }
const Tokenizer& Model::tokenizer() const { return *w_->tokenizer; }
const LoadOptions& Model::options() const { return w_->opts; }
double Model::weight_rel_mse() const { return w_->sq_ref > 0 ? w_->sq_err / w_->sq_ref : 0.0; }
const std::vector<std::string>& Model::ineligible_layers() const {
  return w_->nestedfp_ineligible;
}

size_t Model::weight_bytes() const {
  const ModelWeights& w = *w_;
  auto vec = [](const std::vector<float>& v) { return v.size() * sizeof(float); };
  auto lin = [&](const LinearWeight& l) { return l.w.bytes() + vec(l.bias); };
  size_t n = w.embed.bytes() + vec(w.final_norm) + (w.lm_head ? lin(*w.lm_head) : 0);
  for (const LayerWeights& L : w.layers)
    n += vec(L.attn_norm) + vec(L.ffn_norm) + vec(L.q_norm) + vec(L.k_norm) + lin(L.q) +
         lin(L.k) + lin(L.v) + lin(L.o) + lin(L.gate) + lin(L.up) + lin(L.down);
  return n;
}

}  // namespace nibble

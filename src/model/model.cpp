// Model::load: picks the loader by what the path is, then resolves the activation and KV-cache
// formats.
#include <filesystem>
#include <string>
#include <vector>

#include "model/loaders.h"
#include "model/weights.h"
#include "nibble/error.h"

namespace nibble {
namespace {

// LoadOptions::kv_cache -> the format and block the Session quantizes each (token, KV head) row
// with; a trial row checks now that the format takes rows of head_dim.
void resolve_kv_format(ModelWeights& w) {
  const std::string& name = w.opts.kv_cache;
  if (name.empty()) return;
  const FormatInfo* found = nullptr;
  try {
    found = &find_format(name);
  } catch (const Error& e) {
    throw Error(std::string("KV-cache format: ") + e.what());
  }
  const FormatInfo& f = *found;
  const int d = w.cfg.head_dim;
  if (name.starts_with("nestedfp"))
    throw Error("KV-cache format \"" + name + "\": NestedFP holds only |x| < 1.875, not K and V rows");
  w.kv_block = f.default_block > 0 && d % f.default_block != 0 ? d : 0;
  std::vector<float> row(static_cast<size_t>(d));
  for (int i = 0; i < d; ++i) row[size_t(i)] = 0.01f * float(i + 1);
  try {
    QuantOptions opt;
    opt.block = w.kv_block;
    opt.name = "KV-cache row";
    f.quantize(row.data(), 1, d, opt);
  } catch (const Error& e) {
    throw Error("KV-cache format \"" + name + "\" for head_dim " + std::to_string(d) + ": " + e.what());
  }
  w.kv_format = &f;
}

}  // namespace

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
  resolve_kv_format(w);
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

#include "cuda_runtime/models.h"

#include <map>

#include "cuda_runtime/compare.h"

namespace nibble::cuda::test {
namespace {

const TinyHf& cached(const std::string& key, const TinyHfSpec& spec) {
  static std::map<std::string, std::unique_ptr<TinyHf>> models;
  auto& m = models[key];
  if (!m) m = std::make_unique<TinyHf>(spec, model_seed() + uint32_t(models.size()));
  return *m;
}

}  // namespace

uint32_t model_seed() {
  static const uint32_t seed = fresh_seed();
  return seed;
}

const TinyHf& llama_model(int inter) {
  TinyHfSpec s;
  s.inter = inter;
  return cached("llama" + std::to_string(inter), s);
}

const TinyHf& llama_wide_model() {
  TinyHfSpec s;
  s.inter = 6144, s.heads = 2, s.kv_heads = 1, s.head_dim = 128, s.layers = 2;
  return cached("llama-wide", s);
}

const TinyHf& qwen3_model() {
  TinyHfSpec s;
  s.arch = "Qwen3ForCausalLM";
  s.inter = 768;
  return cached("qwen3", s);
}

const TinyHf& qwen2_model() {
  TinyHfSpec s;
  s.arch = "Qwen2ForCausalLM";
  s.inter = 768;
  return cached("qwen2", s);
}

const TinyHf& tied_model() {
  TinyHfSpec s;
  s.tied = true;
  s.inter = 768;
  return cached("tied", s);
}

std::unique_ptr<Model> load(const TinyHf& m, const std::string& weight_format, const std::string& act_format,
                            const std::string& kv_cache) {
  LoadOptions o;
  o.weight_format = weight_format;
  o.act_format = act_format;
  o.kv_cache = kv_cache;
  return Model::load(m.dir(), o);
}

}  // namespace nibble::cuda::test

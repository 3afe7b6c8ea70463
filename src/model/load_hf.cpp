// Hugging Face directory: config.json, tokenizer files, safetensors (single or sharded). A
// directory written by save_quantized carries "quantization_config" {quant_method: "nibble"} and
// packed linears, read back through packed_io.
#include "model/build_weights.h"
#include "model/loaders.h"
#include "nibble/error.h"
#include "nibble/packed_io.h"
#include "nibble/safetensors.h"

namespace nibble {

void load_hf_directory(const std::filesystem::path& dir, ModelWeights& w) {
  w.cfg = ModelConfig::load(dir);
  w.tokenizer = Tokenizer::load(w.opts.tokenizer.empty() ? dir : w.opts.tokenizer);
  const TensorStore store = TensorStore::open_dir(dir);
  WeightSource src;
  src.where = dir.string();
  src.find = [&store](const std::string& name) { return store.find(name); };
  const nlohmann::json& q = w.cfg.quantization;
  if (q.is_object() && q.value("quant_method", "") == "nibble") {
    // Saved activation format applies unless the caller overrides it.
    if (w.opts.act_format.empty() && q.contains("activation_format") &&
        q["activation_format"].is_string())
      w.opts.act_format = q["activation_format"].get<std::string>();
    src.packed = [&store](const std::string& base) -> std::optional<PackedTensor> {
      if (!has_packed(store, base)) return std::nullopt;
      return read_packed(store, base);
    };
    src.has_packed = [&store](const std::string& base) { return has_packed(store, base); };
  }
  build_weights(src, w);
}

}  // namespace nibble

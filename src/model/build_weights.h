#pragma once
// Assembles ModelWeights from named tensors in Hugging Face naming, whatever their origin
// (an HF directory, a nibble-quantized directory, a converted llama2.c checkpoint).
#include <functional>
#include <optional>
#include <string>

#include "model/weights.h"
#include "nibble/safetensors.h"

namespace nibble {

struct WeightSource {
  std::string where;  // directory / file, named in errors
  std::function<const TensorView*(const std::string& name)> find;
  // A packed (nibble-quantized) linear stored under `base` (NAME.qweight, ...), if present.
  std::function<std::optional<PackedTensor>(const std::string& base)> packed;
  std::function<bool(const std::string& base)> has_packed;  // set together with `packed`
};

// Fills w.layers / embed / final_norm / lm_head from src per w.cfg and w.opts.
void build_weights(const WeightSource& src, ModelWeights& w);

}  // namespace nibble

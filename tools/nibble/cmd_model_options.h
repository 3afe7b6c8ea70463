#pragma once
// CLI flags shared by the commands that load a model (ppl, quantize, compare, generate): weight
// format, its block / special values, which layers besides the decoder's it covers, activation
// format, the device that runs the model.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "nibble/error.h"
#include "nibble/model.h"
#ifdef NIBBLE_HAVE_CUDA
#include "nibble/cuda/runtime.h"
#endif

namespace nibble::cli {

struct ModelFlags {
  std::string model, format, act_format, sv, kv_cache;
  int block = 0;
  bool embeddings = false, lm_head = false;  // -f covers the token embeddings / the output layer too
};

// --quantize-embeddings / --quantize-lm-head (with -f; load_options checks)
inline void add_extent_flags(CLI::App* cmd, ModelFlags& f) {
  cmd->add_flag("--quantize-embeddings", f.embeddings, "also quantize the token embeddings to -f's format");
  cmd->add_flag("--quantize-lm-head", f.lm_head, "also quantize the output layer to -f's format");
}

inline void add_kv_flag(CLI::App* cmd, std::string& kv_cache) {
  cmd->add_option("--kv-cache", kv_cache,
                  "quantize each K and V row as it enters the KV cache: any format on the CPU (e.g. fp8-e4m3, "
                  "razer-fp4-g128, int4-g128: blocks of head_dim where the format's do not fit), fp16 or "
                  "fp8-e4m3 on the GPU (default: unquantized: FP32 on the CPU, FP16 on the GPU)");
}

inline void add_quant_flags(CLI::App* cmd, ModelFlags& f) {
  cmd->add_option("-f,--format", f.format, "quantize the weights on load to this format");
  cmd->add_option("--act-format", f.act_format,
                  "quantize per token the input of each quantized linear (of every decoder linear without -f), e.g. nvfp4-razer-act");
  cmd->add_option("--block", f.block, "block / group size (default: the format's)");
  cmd->add_option("--sv", f.sv, "RaZeR special-value pair A,B (e.g. 5,8)");
  add_extent_flags(cmd, f);
}

// "A,B" -> sv pair; throws nibble::Error naming the flag on malformed input.
inline void parse_sv(const std::string& s, QuantOptions& q) {
  if (s.empty()) return;
  const size_t comma = s.find(',');
  try {
    if (comma == std::string::npos) throw std::invalid_argument("no comma");
    size_t used_a = 0, used_b = 0;
    q.sv_a = std::stof(s.substr(0, comma), &used_a);
    q.sv_b = std::stof(s.substr(comma + 1), &used_b);
    if (used_a != comma || used_b != s.size() - comma - 1) throw std::invalid_argument("junk");
  } catch (const std::exception&) {
    throw Error("--sv: expected two numbers A,B (e.g. 5,8), got \"" + s + "\"");
  }
}

// Throws nibble::Error on --quantize-embeddings / --quantize-lm-head without a format to quantize to.
inline LoadOptions load_options(const ModelFlags& f) {
  if (f.format.empty() && (f.embeddings || f.lm_head))
    throw Error(std::string(f.lm_head ? "--quantize-lm-head" : "--quantize-embeddings") +
                ": give the format with -f FORMAT (it quantizes to -f's format)");
  LoadOptions o;
  o.weight_format = f.format;
  o.act_format = f.act_format;
  o.kv_cache = f.kv_cache;
  o.quant.block = f.block;
  o.quantize_embeddings = f.embeddings;
  o.quantize_lm_head = f.lm_head;
  parse_sv(f.sv, o.quant);
  o.progress = true;
  return o;
}

inline void add_device_flag(CLI::App* cmd, std::string& device) {
  cmd->add_option("--device", device, "where the model runs: cpu, or cuda (the GPU: FP16 activations, FP32 residual and logits)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

// Throws nibble::Error when --device cuda is asked of a build without CUDA.
inline void require_device(const std::string& device) {
#ifndef NIBBLE_HAVE_CUDA
  if (device == "cuda")
    throw Error("--device cuda: this nibble was built without CUDA (nvcc was not found when it was configured)");
#endif
}

// The model's weights on the device for --device cuda (nothing for cpu); keep it alive while
// the sequences made from it run.
struct DeviceRuntime {
#ifdef NIBBLE_HAVE_CUDA
  std::unique_ptr<cuda::DeviceModel> model;
#endif
};

// Where perplexity windows run: empty (a CPU Session) for --device cpu; for cuda, uploads m
// into rt and returns a factory of GPU sequences. Throws nibble::Error when the model cannot run
// on the GPU (an activation format, no CUDA in this build, too little device memory).
inline SequenceFactory sequence_factory(const std::string& device, const Model& m, DeviceRuntime& rt) {
  require_device(device);
  if (device != "cuda") return {};
#ifdef NIBBLE_HAVE_CUDA
  rt.model.reset();  // free the previous model's weights first
  rt.model = std::make_unique<cuda::DeviceModel>(m, cuda::DeviceModelOptions{true});
  const cuda::DeviceModel* dm = rt.model.get();
  return [dm](int max_context) { return cuda::make_sequence(*dm, max_context); };
#else
  (void)m, (void)rt;
  return {};
#endif
}

}  // namespace nibble::cli

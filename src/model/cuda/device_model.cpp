// DeviceModel: uploads a Model's weights once; reports layers that run dequantized to FP16.
#include <fmt/format.h>

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>

#include "model/cuda/device_model_impl.h"
#include "model/cuda/fp16_weights.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"
#include "nibble/progress.h"

namespace nibble::cuda {
namespace {

void check_supported(const ModelWeights& w) {
  const ModelConfig& c = w.cfg;
  kv_type(w.opts.kv_cache);  // throws for a KV-cache format the GPU does not hold
  if (w.act_format)
    throw Error(fmt::format("--device cuda: activation format '{}' is not supported on the GPU (fake-quantized "
                            "activations run on the CPU only; drop --act-format or use --device cpu)",
                            w.act_format->name));
  if (c.head_dim != 64 && c.head_dim != 128)
    throw Error(fmt::format("config.json: head_dim {} is not supported by the CUDA attention (64 or 128)", c.head_dim));
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
    throw Error(fmt::format("config.json: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                            c.num_heads, c.num_kv_heads));
}

// One line per format whose layers run dequantized to FP16 (instead of one per layer).
void warn_fp16_fallbacks(const DeviceModel::Impl& m) {
  std::map<std::string, std::pair<int, const DeviceLinear*>> by_format;
  auto note = [&](const DeviceLinear& l) {
    if (l.fp16_reason().empty()) return;
    auto& [n, first] = by_format[l.format()];
    if (n++ == 0) first = &l;
  };
  for (const DeviceLayer& L : m.layers)
    for (const DeviceLinear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) note(*l);
  if (m.head_quantized) note(*m.head_quantized);
  for (const auto& [format, e] : by_format)
    std::fprintf(stderr, "nibble: warning: %d %s linear(s) run dequantized to FP16 through cuBLAS (%s)\n", e.first,
                 format.c_str(), e.second->fp16_reason().c_str());
}

// Threads for the layers' upload: each holds a layer's host-side copies (~0.5 GB at 8B in FP16).
int upload_threads(int64_t layers) {
  return int(std::max<int64_t>(1, std::min<int64_t>({layers, omp_get_max_threads(), 8})));
}

}  // namespace

void DeviceModel::Impl::logits(const uint16_t* xn, int M, float* out, uint16_t* logits16,
                               const LinearExec& ex) const {
  const int H = cfg->hidden_size;
  if (head_quantized) {
    head_quantized->run(xn, M, logits16, ex);
    ops::half_to_float(logits16, int64_t(M) * vocab, out, ex.stream);
    return;
  }
  const uint16_t* head = head_fp16.empty() ? embed.get() : head_fp16.get();  // tied: the embedding table
  if (M == 1 && H % 8 == 0)  // the FP16 GEMV: 1.05 GB of Llama-3.1-8B's head read faster than cuBLAS
    linear_fp16_f32out(xn, head, vocab, H, out, ex.stream);
  else
    ex.cublas->gemm_f32out(xn, head, out, M, int(vocab), H, ex.stream);
}

DeviceModel::DeviceModel(const Model& m, const DeviceModelOptions& opt) : p_(std::make_unique<Impl>()) {
  const ModelWeights& w = m.weights();
  check_supported(w);
  Impl& d = *p_;
  d.model = &m;
  d.cfg = &m.config();
  d.vocab = w.output_weight().rows;
  if (w.embed.rows != d.vocab)
    throw Error(fmt::format("model.embed_tokens has {} rows, the output layer {}", w.embed.rows, d.vocab));
  Progress bar("upload", int64_t(w.layers.size()) + 2);
  if (!opt.progress) bar.finish();
  std::string what = "model.embed_tokens";
  try {
    d.embed = DeviceBuffer<uint16_t>(dequantize_fp16(w.embed, what));
    bar.add();
    // Layers are repacked, converted and copied on several threads: on one, the host-side work held
    // Llama-3.1-8B's upload to ~0.3 GB/s (53 s in FP16, 20-26 s in the 4-bit formats; H200, 2026-11-28).
    const int64_t n = int64_t(w.layers.size());
    std::vector<std::optional<DeviceLayer>> layers(w.layers.size());
    std::vector<std::exception_ptr> failed(w.layers.size());
    int device = 0;
    NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
#pragma omp parallel for schedule(dynamic, 1) num_threads(upload_threads(n))
    for (int64_t l = 0; l < n; ++l) {
      try {
        NIBBLE_CUDA_CHECK(cudaSetDevice(device));  // a worker thread starts on device 0
        layers[size_t(l)].emplace(w.layers[size_t(l)], w.cfg, opt.stack_linears);
      } catch (...) {
        failed[size_t(l)] = std::current_exception();
      }
#pragma omp critical(nibble_upload_progress)
      bar.add();
    }
    d.layers.reserve(size_t(n));
    for (int64_t l = 0; l < n; ++l) {
      what = fmt::format("model.layers.{}", l);
      if (failed[size_t(l)]) std::rethrow_exception(failed[size_t(l)]);
      d.layers.push_back(std::move(*layers[size_t(l)]));
    }
    what = "model.norm / output layer";
    d.final_norm = DeviceBuffer<float>(w.final_norm);
    const std::string head = w.lm_head ? "lm_head" : "model.embed_tokens (tied output layer)";
    if (w.output_quantized())
      d.head_quantized.emplace(w.output_weight(), std::span<const float>(), head);
    else if (w.lm_head)
      d.head_fp16 = DeviceBuffer<uint16_t>(dequantize_fp16(w.lm_head->w, head));
    bar.add();
  } catch (const Error& e) {
    throw Error(fmt::format("uploading {} to the GPU: {}", what, e.what()));
  }
  bar.finish();
  const size_t head_fp16 = size_t(d.vocab) * size_t(w.cfg.hidden_size) * 2;
  d.weight_bytes = d.final_norm.bytes() + (d.head_quantized ? d.head_quantized->decode_bytes() : head_fp16);
  d.device_bytes = d.final_norm.bytes() + d.embed.bytes() + d.head_fp16.bytes() +
                   (d.head_quantized ? d.head_quantized->device_bytes() : 0);
  for (const DeviceLayer& L : d.layers) {
    d.weight_bytes += L.decode_bytes();
    d.device_bytes += L.device_bytes();
  }
  warn_fp16_fallbacks(d);
}

DeviceModel::~DeviceModel() = default;

const Model& DeviceModel::model() const { return *p_->model; }
size_t DeviceModel::weight_bytes() const { return p_->weight_bytes; }
size_t DeviceModel::device_bytes() const { return p_->device_bytes; }

}  // namespace nibble::cuda

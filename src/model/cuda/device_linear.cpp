#include "model/cuda/device_linear.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "model/cuda/fp16_weights.h"
#include "model/cuda/upload_choice.h"
#include "nibble/cuda/crossover.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

// The GEMM that reads format f ("" for none). nvfp4-4over6 is NVFP4 storage and decoder
// (FORMATS.md). nestedfp8's GEMM quantizes the activations to FP8 per token (W8A8) while the model
// runs it W8A16 like the CPU does, so it is not used.
std::string gemm_format(const std::string& f) {
  if (f == "nvfp4-4over6") return "nvfp4";
  return has_gemm_kernel(f) && f != "nestedfp8" ? f : "";
}

}  // namespace

DeviceLinear::DeviceLinear(const PackedTensor& w, std::span<const float> bias, std::string name, Held held)
    : name_(std::move(name)), format_(w.format), N_(w.rows), K_(w.cols), held_(held),
      crossover_(crossover_for(gemm_format(w.format).empty() ? w.format : gemm_format(w.format), w.cols, w.rows)) {
  if (!bias.empty()) {
    if (int64_t(bias.size()) != N_)
      throw Error(fmt::format("{}: bias has {} elements, the weight has {} rows", name_, bias.size(), N_));
    bias_ = DeviceBuffer<float>(std::vector<float>(bias.begin(), bias.end()));
  }
  if (held_ == Held::gemv_in_layer && is_plain_float(format_)) return;
  std::string why;
  if (held_ == Held::here && takes_gemv(format_))
    try_upload(gemv_, why, [&] {
      PackedTensor converted;
      return upload(gemv_source(w, name_, converted), name_);
    });
  if (const std::string g = gemm_format(format_); !g.empty())
    try_upload(gemm_, why, [&] {
      if (g == w.format) return upload_gemm(w, name_);
      PackedTensor same_storage = w;
      same_storage.format = g;
      return upload_gemm(same_storage, name_);
    });
  if (gemv_ || held_ == Held::gemv_in_layer || gemm_) return;
  if (!is_plain_float(format_))
    fp16_reason_ = why.empty() ? fmt::format("format '{}' has no CUDA kernel", format_) : why;
  fp16_ = DeviceBuffer<uint16_t>(dequantize_fp16(w, name_));
}

DeviceLinear::Path DeviceLinear::path_for(int M) const {
  const bool gemv = gemv_ || held_ == Held::gemv_in_layer;
  if (!gemv && !gemm_) return Path::fp16;
  if (is_plain_float(format_)) return M <= kFp16GemvMaxRows ? Path::gemv : Path::fp16;
  if (gemm_ && M >= crossover_.dequant_from_m) return Path::dequant_cublas;
  if (gemv && (M < crossover_.gemm_from_m || !gemm_)) return Path::gemv;
  return Path::gemm;
}

const uint16_t* DeviceLinear::fp16_weight() const {
  return !fp16_.empty() ? fp16_.get() : fp16_matrix(gemv_);
}

void DeviceLinear::run(const uint16_t* x, int M, uint16_t* y, const LinearExec& ex) const {
  if (M < 1) throw Error(fmt::format("{}: M = {} rows", name_, M));
  switch (path_for(M)) {
    case Path::gemv:  // the GEMV takes at most 16 rows: larger M without a GEMM goes in chunks
      if (!gemv_) throw Error(fmt::format("{}: its GEMV layout is stacked with its neighbours: run it through its layer", name_));
      for (int m0 = 0; m0 < M; m0 += 16)
        linear(x + int64_t(m0) * K_, std::min(16, M - m0), *gemv_, y + int64_t(m0) * N_, ex.stream);
      break;
    case Path::gemm:
      gemm(x, M, *gemm_, y, *ex.gemm_ws, ex.stream);
      break;
    case Path::dequant_cublas: {
      auto* w16 = static_cast<uint16_t*>(ex.gemm_ws->get(size_t(N_) * size_t(K_) * 2, 2));
      dequantize_fp16(*gemm_, w16, ex.stream);
      ex.cublas->gemm(x, w16, y, M, int(N_), int(K_), ex.stream);
      break;
    }
    case Path::fp16: {
      const uint16_t* w16 = fp16_weight();
      if (!w16) throw Error(fmt::format("{}: its FP16 weight is stacked with its neighbours: run it through its layer", name_));
      ex.cublas->gemm(x, w16, y, M, int(N_), int(K_), ex.stream);
      break;
    }
  }
  add_bias(y, M, ex.stream);
}

void DeviceLinear::add_bias(uint16_t* y, int M, cudaStream_t stream) const {
  if (!bias_.empty()) ops::add_bias(y, bias_.get(), M, int(N_), stream);
}

size_t DeviceLinear::decode_bytes() const {
  size_t w = 0;
  switch (path_for(1)) {
    case Path::gemv: w = gemv_ ? gemv_->bytes() : 0; break;  // a stack counts at its layer
    case Path::gemm:
    case Path::dequant_cublas: w = gemm_->bytes(); break;
    case Path::fp16: w = fp16_.bytes(); break;
  }
  return w + bias_.bytes();
}

size_t DeviceLinear::device_bytes() const {
  size_t b = fp16_.bytes() + bias_.bytes();
  if (gemv_) b += gemv_->bytes() + gemv_->mma_bytes;
  if (gemm_) b += gemm_->bytes();
  return b;
}

}  // namespace nibble::cuda

#pragma once
// What DeviceLinear and DeviceLayer share when they choose the layouts a weight is uploaded in.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/cuda/fp16_weights.h"
#include "nibble/cuda/linear.h"
#include "nibble/error.h"

namespace nibble::cuda {

// Plain float weights are meant to run through cuBLAS as FP16: no kernel, no warning.
inline bool is_plain_float(std::string_view f) { return f == "fp32" || f == "fp16" || f == "bf16"; }

// Whether a GEMV can read a weight of format f: its own kernel, or FP16 for a plain float format.
inline bool takes_gemv(std::string_view f) { return has_kernel(f) || is_plain_float(f); }

// What the GEMV upload of w (takes_gemv) reads: w itself, or a bf16 / fp32 weight converted to FP16
// into `converted` (throws like dequantize_fp16 on values FP16 cannot hold).
inline const PackedTensor& gemv_source(const PackedTensor& w, std::string_view name, PackedTensor& converted) {
  if (has_kernel(w.format)) return w;
  converted = as_fp16(w, name);
  return converted;
}

// The row-major FP16 [N, K] matrix of a plain float weight's GEMV upload, which cuBLAS reads too;
// null when w is absent or of another format.
inline const uint16_t* fp16_matrix(const std::optional<DeviceWeight>& w) {
  return w && w->kind == WeightKind::fp16 ? static_cast<const uint16_t*>(w->qweight) : nullptr;
}

// out = up(), or, when a kernel does not take this shape, nothing and the first reason in why.
// A CUDA failure (out of memory, no device) is not a shape problem: it is rethrown.
template <class W, class Upload>
void try_upload(std::optional<W>& out, std::string& why, const Upload& up) {
  try {
    out = up();
  } catch (const Error& e) {
    if (std::string_view(e.what()).starts_with("CUDA error")) throw;
    if (why.empty()) why = e.what();
  }
}

}  // namespace nibble::cuda

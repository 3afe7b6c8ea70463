#pragma once
// The format registry: every weight / activation number format nibble knows, as data.
// A format is a name, its storage cost, and two functions: quantize (float matrix -> packed, in
// the serialized layout of ../shared/FORMATS.md) and dequantize_rows (packed -> float, any row
// range, so kernels can decode on the fly without a full float copy).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nibble {

// A matrix [rows, cols] in one format. Blocks / groups run along cols (the reduction axis K of a
// linear layer, whose weight is stored [N=rows, K=cols] as Hugging Face does).
struct PackedTensor {
  std::string format;            // registry name
  int64_t rows = 0, cols = 0;
  int block = 0;                 // block / group size along cols
  std::vector<uint8_t> qweight;  // packed element codes, row-major, serialized layout
  std::vector<uint8_t> scales;   // per-block scales as raw bytes (dtype: FormatInfo::scale_dtype)
  std::vector<uint8_t> aux;      // a second plane where the format has one (FormatInfo::aux_name)
  float global_scale = 1.0f;     // FP32 per-tensor scale (1 where unused)
  float sv_a = 0.0f, sv_b = 0.0f;  // RaZeR special-value magnitudes (0 where unused)

  size_t bytes() const { return qweight.size() + scales.size() + aux.size() + sizeof(float); }
};

struct QuantOptions {
  int block = 0;                  // 0: the format's default
  float sv_a = 0.0f, sv_b = 0.0f; // RaZeR special-value pair; 0: the format's default
  std::string_view name = "tensor";  // named in error messages (NaN/Inf input, bad shapes)
};

struct FormatInfo {
  std::string_view name;          // e.g. "nvfp4-razer"
  std::string_view description;   // one line, for `nibble formats list`
  int default_block = 0;          // block / group size (0: per row)
  double bits_per_weight = 0;     // storage incl. scales, at the default block
  std::string_view scale_dtype;   // safetensors dtype of .scales ("F8_E4M3", "U8", "F16", "F32", ...)
  std::string_view aux_name;      // safetensors suffix of the aux plane ("" if none)
  bool for_activations = false;   // may be applied to activations online (per token)
  PackedTensor (*quantize)(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) =
      nullptr;
  void (*dequantize_rows)(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) = nullptr;
};

// All formats, in the order `nibble formats list` shows them.
const std::vector<FormatInfo>& all_formats();
// Throws nibble::Error naming the unknown format and listing the known ones.
const FormatInfo& find_format(std::string_view name);

// Conveniences over the registry.
PackedTensor quantize(std::string_view format, const float* x, int64_t rows, int64_t cols,
                      const QuantOptions& opt = {});
std::vector<float> dequantize(const PackedTensor& t);

}  // namespace nibble

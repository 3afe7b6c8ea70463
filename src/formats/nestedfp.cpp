// nestedfp / nestedfp8: FP16 weights stored as an E4M3 upper plane (qweight) and a lower byte
// plane (aux "lower"); nestedfp decodes the exact FP16, nestedfp8 only the upper plane (FP8 mode).
#include <fmt/format.h>

#include "formats/common.h"
#include "formats/families.h"
#include "formats/scale_codes.h"
#include "nibble/half.h"
#include "nibble/nestedfp.h"

namespace nibble::formats {
namespace {

PackedTensor quantize_planes(const char* format, const float* x, int64_t rows, int64_t cols,
                             const QuantOptions& opt) {
  check_shape(rows, cols, format, opt.name);
  resolve_block(opt.block, 0, false, "no blocks", format, opt.name);
  checked_amax(x, rows, cols, format, opt.name);
  PackedTensor t;
  t.format = format;
  t.rows = rows;
  t.cols = cols;
  t.qweight.assign(size_t(rows * cols), 0);
  t.aux.assign(size_t(rows * cols), 0);
  for (int64_t i = 0; i < rows * cols; ++i) {
    uint16_t w = float_to_half(x[i]);
    if (!nestedfp::eligible(w)) {
      throw Error(fmt::format("tensor '{}' is not NestedFP-eligible: element [{}, {}] = {} (FP16 "
                              "{}) needs |w| < 1.875",
                              opt.name, i / cols, i % cols, x[i], half_to_float(w)));
    }
    nestedfp::Planes p = nestedfp::split(w);
    t.qweight[size_t(i)] = p.upper;
    t.aux[size_t(i)] = p.lower;
  }
  return t;
}

PackedTensor quantize_fp16_mode(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  return quantize_planes("nestedfp", x, rows, cols, opt);
}
PackedTensor quantize_fp8_mode(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  return quantize_planes("nestedfp8", x, rows, cols, opt);
}

void dequantize_fp16_mode(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  check_packed(t, "nestedfp", {t.cols, 0, t.cols}, row0, nrows);
  const uint8_t* u = t.qweight.data() + row0 * t.cols;
  const uint8_t* l = t.aux.data() + row0 * t.cols;
  for (int64_t i = 0; i < nrows * t.cols; ++i) out[i] = half_to_float(nestedfp::reconstruct(u[i], l[i]));
}

void dequantize_fp8_mode(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  check_packed(t, "nestedfp8", {t.cols, 0, t.cols}, row0, nrows);
  const float* table = e4m3_table();
  const uint8_t* u = t.qweight.data() + row0 * t.cols;
  for (int64_t i = 0; i < nrows * t.cols; ++i) out[i] = table[u[i]] * 0x1p-8f;
}

}  // namespace

void add_nestedfp_formats(std::vector<FormatInfo>& out) {
  out.push_back({"nestedfp", "NestedFP: FP16 split into an E4M3 upper byte + lower byte (exact FP16)", 0,
                 16, "", "lower", false, quantize_fp16_mode, dequantize_fp16_mode});
  out.push_back({"nestedfp8", "NestedFP storage decoded in FP8 mode: E4M3(upper) * 2^-8", 0, 8, "",
                 "lower", false, quantize_fp8_mode, dequantize_fp8_mode});
}

}  // namespace nibble::formats

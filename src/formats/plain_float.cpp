// fp32 / fp16 / bf16: raw little-endian values in qweight, no scales.
#include <cmath>

#include <fmt/format.h>

#include "formats/common.h"
#include "formats/families.h"
#include "nibble/half.h"

namespace nibble::formats {
namespace {

PackedTensor make(std::string_view format, int64_t rows, int64_t cols, int bytes_per_value) {
  PackedTensor t;
  t.format = std::string(format);
  t.rows = rows;
  t.cols = cols;
  t.qweight.resize(size_t(rows * cols * bytes_per_value));
  return t;
}

PackedTensor quantize_fp32(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  check_shape(rows, cols, "fp32", opt.name);
  checked_amax(x, rows, cols, "fp32", opt.name);
  PackedTensor t = make("fp32", rows, cols, 4);
  if (rows * cols != 0) std::memcpy(t.qweight.data(), x, size_t(rows * cols) * 4);
  return t;
}

void dequantize_fp32(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  check_packed(t, "fp32", {t.cols * 4, 0, 0}, row0, nrows);
  if (nrows * t.cols != 0) std::memcpy(out, t.qweight.data() + row0 * t.cols * 4, size_t(nrows * t.cols) * 4);
}

// 16-bit types: to_bits rounds to nearest even; a finite value that overflows to Inf is an error.
template <uint16_t (*to_bits)(float), float (*from_bits)(uint16_t)>
PackedTensor quantize_16(const char* format, const float* x, int64_t rows, int64_t cols,
                         const QuantOptions& opt) {
  check_shape(rows, cols, format, opt.name);
  checked_amax(x, rows, cols, format, opt.name);
  PackedTensor t = make(format, rows, cols, 2);
  uint8_t* q = t.qweight.data();
  bool overflow = false;  // found in parallel, reported (first element) serially
#pragma omp parallel for reduction(|| : overflow) schedule(static) if (rows * cols >= (1 << 20))
  for (int64_t i = 0; i < rows * cols; ++i) {
    const uint16_t b = to_bits(x[i]);
    overflow = overflow || std::isinf(from_bits(b));
    put_u16(q + 2 * i, b);
  }
  for (int64_t i = 0; overflow && i < rows * cols; ++i) {
    if (std::isinf(from_bits(to_bits(x[i]))))
      throw Error(fmt::format("tensor '{}': element [{}, {}] = {} overflows {}", opt.name, i / cols,
                              i % cols, x[i], format));
  }
  return t;
}

template <float (*from_bits)(uint16_t)>
void dequantize_16(const char* format, const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  check_packed(t, format, {t.cols * 2, 0, 0}, row0, nrows);
  const uint8_t* q = t.qweight.data() + row0 * t.cols * 2;
  for (int64_t i = 0; i < nrows * t.cols; ++i) out[i] = from_bits(get_u16(q + 2 * i));
}

PackedTensor quantize_fp16(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  return quantize_16<float_to_half, half_to_float>("fp16", x, rows, cols, opt);
}
void dequantize_fp16(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  dequantize_16<half_to_float>("fp16", t, row0, nrows, out);
}
PackedTensor quantize_bf16(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  return quantize_16<float_to_bf16, bf16_to_float>("bf16", x, rows, cols, opt);
}
void dequantize_bf16(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  dequantize_16<bf16_to_float>("bf16", t, row0, nrows, out);
}

}  // namespace

void add_plain_float_formats(std::vector<FormatInfo>& out) {
  out.push_back({"fp32", "IEEE float32, unquantized", 0, 32, "", "", true, quantize_fp32, dequantize_fp32});
  out.push_back({"fp16", "IEEE float16 (round to nearest even)", 0, 16, "", "", true, quantize_fp16,
                 dequantize_fp16});
  out.push_back({"bf16", "bfloat16 (round to nearest even)", 0, 16, "", "", true, quantize_bf16,
                 dequantize_bf16});
}

}  // namespace nibble::formats

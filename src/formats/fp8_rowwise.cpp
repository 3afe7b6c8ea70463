// fp8-e4m3: one F32 scale per row (per channel / per token), scale = amax / 448.
#include "formats/common.h"
#include "formats/families.h"
#include "formats/scale_codes.h"

namespace nibble::formats {
namespace {

constexpr const char* kName = "fp8-e4m3";

void quantize_row(const float* x, int64_t cols, uint8_t* q, uint8_t* scale_out) {
  float scale = max_abs(x, cols) / 448.0f;
  put_f32(scale_out, scale);
  if (scale == 0.0f) return;  // all-zero row (or amax so small the scale underflows): codes 0
  double s = scale;
  for (int64_t i = 0; i < cols; ++i) q[i] = uint8_t(e4m3_signed_code(double(x[i]) / s));
}

PackedTensor quantize(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  check_shape(rows, cols, kName, opt.name);
  resolve_block(opt.block, 0, false, "per-row scale only", kName, opt.name);
  checked_amax(x, rows, cols, kName, opt.name);
  PackedTensor t;
  t.format = kName;
  t.rows = rows;
  t.cols = cols;
  t.qweight.assign(size_t(rows * cols), 0);
  t.scales.assign(size_t(rows * 4), 0);
  for_rows(rows, cols, [&](int64_t r) {
    quantize_row(x + r * cols, cols, t.qweight.data() + r * cols, t.scales.data() + r * 4);
  });
  return t;
}

void dequantize_rows(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  check_packed(t, kName, {t.cols, 4, 0}, row0, nrows);
  const float* table = e4m3_table();
  for_rows(nrows, t.cols, [&](int64_t r) {
    const uint8_t* q = t.qweight.data() + (row0 + r) * t.cols;
    float s = get_f32(t.scales.data() + (row0 + r) * 4);
    float* o = out + r * t.cols;
    for (int64_t i = 0; i < t.cols; ++i) o[i] = table[q[i]] * s;
  });
}

}  // namespace

void add_fp8_formats(std::vector<FormatInfo>& out) {
  out.push_back({kName, "FP8 E4M3 codes, one FP32 scale (amax / 448) per row", 0, 8, "F32", "", true,
                 quantize, dequantize_rows});
}

}  // namespace nibble::formats

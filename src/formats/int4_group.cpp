// int4-g128: asymmetric INT4, group 128 along the row; FP16 scales, 4-bit zero points packed
// two per byte in aux ("qzeros", group 2j in the low nibble, each row padded to whole bytes).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "formats/common.h"
#include "formats/families.h"
#include "nibble/codec.h"
#include "nibble/half.h"

namespace nibble::formats {
namespace {

constexpr const char* kName = "int4-g128";

RowBytes row_bytes(int64_t cols, int block) {
  int64_t nb = block_count(cols, block);
  return {nb * block / 2, nb * 2, (nb + 1) / 2};
}

// One group: min and max include 0 (so the zero point is in 0..15, as GPTQ does).
void quantize_group(const float* x, int64_t n, uint8_t* q, int64_t q0, uint8_t* scale,
                    uint8_t* zeros, int64_t g, std::string_view tensor) {
  double lo = 0, hi = 0;
  for (int64_t i = 0; i < n; ++i) lo = std::min(lo, double(x[i])), hi = std::max(hi, double(x[i]));
  double s = (hi - lo) / 15.0;
  if (s > 65504.0) {
    throw Error(fmt::format("tensor '{}': range {} of a group is too wide for an FP16 int4 scale",
                            tensor, hi - lo));
  }
  uint32_t code = kFP16.encode(s);
  put_u16(scale, uint16_t(code));
  double sh = kFP16.decode(code);
  if (sh == 0.0) return;  // all-zero (or negligible) group: z = 0, q = 0
  uint32_t z = std::min(15u, uint32_t(std::max(0.0, std::nearbyint(-lo / sh))));
  put_nibble(zeros, g, z);
  for (int64_t i = 0; i < n; ++i) put_nibble(q, q0 + i, int4_encode(double(x[i]), sh, z));
}

PackedTensor quantize(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  check_shape(rows, cols, kName, opt.name);
  int block = resolve_block(opt.block, 128, opt.block > 0 && opt.block % 32 == 0 && opt.block <= 4096,
                            "a multiple of 32 up to 4096", kName, opt.name);
  checked_amax(x, rows, cols, kName, opt.name);
  RowBytes rb = row_bytes(cols, block);
  PackedTensor t = new_packed(kName, rows, cols, block, rb);
  int64_t nb = block_count(cols, block);
  for_rows(rows, cols, [&](int64_t r) {
    for (int64_t g = 0; g < nb; ++g) {
      int64_t c0 = g * block, n = std::min<int64_t>(block, cols - c0);
      quantize_group(x + r * cols + c0, n, t.qweight.data() + r * rb.qweight, c0,
                     t.scales.data() + r * rb.scales + g * 2, t.aux.data() + r * rb.aux, g, opt.name);
    }
  });
  return t;
}

void dequantize_rows(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  if (t.block <= 0 || t.block % 32 || t.block > 4096) throw Error(fmt::format("{} tensor: bad block {}", kName, t.block));
  RowBytes rb = row_bytes(t.cols, t.block);
  check_packed(t, kName, rb, row0, nrows);
  for_rows(nrows, t.cols, [&](int64_t r) {
    const uint8_t* q = t.qweight.data() + (row0 + r) * rb.qweight;
    const uint8_t* s = t.scales.data() + (row0 + r) * rb.scales;
    const uint8_t* z = t.aux.data() + (row0 + r) * rb.aux;
    float* o = out + r * t.cols;
    for (int64_t c0 = 0, g = 0; c0 < t.cols; c0 += t.block, ++g) {
      float scale = half_to_float(get_u16(s + 2 * g));
      int zero = int(get_nibble(z, g));
      int64_t n = std::min<int64_t>(t.block, t.cols - c0);
      for (int64_t i = 0; i < n; ++i) o[c0 + i] = float(int(get_nibble(q, c0 + i)) - zero) * scale;
    }
  });
}

}  // namespace

void add_int4_formats(std::vector<FormatInfo>& out) {
  out.push_back({kName, "INT4 asymmetric, group 128, FP16 scale + 4-bit zero point", 128,
                 4 + 16.0 / 128 + 4.0 / 128, "F16", "qzeros", false, quantize, dequantize_rows});
}

}  // namespace nibble::formats

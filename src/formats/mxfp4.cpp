// mxfp4 (OCP MX): block 32, E8M0 scale 2^(floor(log2 bmax) - 2), FP4 E2M1 elements (ties to even).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "formats/common.h"
#include "formats/elements.h"
#include "formats/families.h"
#include "formats/scale_codes.h"

namespace nibble::formats {
namespace {

constexpr const char* kName = "mxfp4";
constexpr int kBlock = 32;

RowBytes row_bytes(int64_t cols) {
  int64_t nb = block_count(cols, kBlock);
  return {nb * kBlock / 2, nb, 0};
}

void quantize_block(const float* x, int64_t n, uint8_t* q, int64_t q0, uint8_t* scale) {
  float bmax = max_abs(x, n);
  int code = bmax == 0.0f ? 0 : std::clamp(std::ilogb(bmax) - 2 + 127, 0, 254);
  *scale = uint8_t(code);
  double inv = std::ldexp(1.0, 127 - code);  // 1 / s_b, exact
  for (int64_t i = 0; i < n; ++i) put_nibble(q, q0 + i, fp4_code_even(double(x[i]) * inv));
}

PackedTensor quantize(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  check_shape(rows, cols, kName, opt.name);
  resolve_block(opt.block, kBlock, opt.block == kBlock, "fixed at 32", kName, opt.name);
  checked_amax(x, rows, cols, kName, opt.name);
  RowBytes rb = row_bytes(cols);
  PackedTensor t = new_packed(kName, rows, cols, kBlock, rb);
  int64_t nb = block_count(cols, kBlock);
  for_rows(rows, cols, [&](int64_t r) {
    for (int64_t b = 0; b < nb; ++b) {
      int64_t c0 = b * kBlock, n = std::min<int64_t>(kBlock, cols - c0);
      quantize_block(x + r * cols + c0, n, t.qweight.data() + r * rb.qweight, c0,
                     t.scales.data() + r * rb.scales + b);
    }
  });
  return t;
}

void dequantize_rows(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  if (t.block != kBlock) throw Error(fmt::format("{} tensor: block {} is not 32", kName, t.block));
  RowBytes rb = row_bytes(t.cols);
  check_packed(t, kName, rb, row0, nrows);
  const float* e8m0 = decode_table<kE8M0>();
  for_rows(nrows, t.cols, [&](int64_t r) {
    const uint8_t* q = t.qweight.data() + (row0 + r) * rb.qweight;
    const uint8_t* s = t.scales.data() + (row0 + r) * rb.scales;
    float* o = out + r * t.cols;
    for (int64_t c0 = 0, b = 0; c0 < t.cols; c0 += kBlock, ++b) {
      float scale = e8m0[s[b]];  // 255 is NaN
      int64_t n = std::min<int64_t>(kBlock, t.cols - c0);
      for (int64_t i = 0; i < n; ++i) o[c0 + i] = kFP4Values[get_nibble(q, c0 + i)] * scale;
    }
  });
}

}  // namespace

void add_mxfp4_formats(std::vector<FormatInfo>& out) {
  out.push_back({kName, "OCP MXFP4: FP4 E2M1, block 32, E8M0 power-of-two scale", kBlock, 4 + 8.0 / 32,
                 "U8", "", true, quantize, dequantize_rows});
}

}  // namespace nibble::formats

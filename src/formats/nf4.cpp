// nf4: 16 lookup levels, FP32 absmax per block (default 64, powers of two 32..4096), and the
// import of bitsandbytes-packed data.
#include "nibble/nf4.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "formats/common.h"
#include "formats/families.h"

namespace nibble {
namespace {

constexpr const char* kName = "nf4";

// Midpoints between neighbouring levels, exact in float64.
struct Midpoints {
  double m[15];
};
const Midpoints& midpoints() {
  static const Midpoints mids = [] {
    Midpoints r{};
    for (int i = 0; i < 15; ++i) r.m[i] = (double(kNF4Levels[i]) + double(kNF4Levels[i + 1])) * 0.5;
    return r;
  }();
  return mids;
}

// Levels above which v lies strictly: ties go to the lower code.
inline uint32_t nf4_code(double v, const double* mids) {
  uint32_t c = 0;
  for (int i = 0; i < 15; ++i) c += v > mids[i] ? 1u : 0u;
  return c;
}

bool valid_block(int b) { return b >= 32 && b <= 4096 && (b & (b - 1)) == 0; }

formats::RowBytes row_bytes(int64_t cols, int block) {
  int64_t nb = formats::block_count(cols, block);
  return {nb * block / 2, nb * 4, 0};
}

void quantize_block(const float* x, int64_t n, uint8_t* q, int64_t q0, uint8_t* scale) {
  float absmax = formats::max_abs(x, n);
  formats::put_f32(scale, absmax);
  const double* mids = midpoints().m;
  if (absmax == 0.0f) {
    for (int64_t i = 0; i < n; ++i) formats::put_nibble(q, q0 + i, 7);  // level 0.0
    return;
  }
  double a = absmax;
  for (int64_t i = 0; i < n; ++i) formats::put_nibble(q, q0 + i, nf4_code(double(x[i]) / a, mids));
}

PackedTensor quantize(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  formats::check_shape(rows, cols, kName, opt.name);
  int block = formats::resolve_block(opt.block, 64, valid_block(opt.block),
                                     "a power of two in 32..4096", kName, opt.name);
  formats::checked_amax(x, rows, cols, kName, opt.name);
  formats::RowBytes rb = row_bytes(cols, block);
  PackedTensor t = new_packed(kName, rows, cols, block, rb);
  int64_t nb = formats::block_count(cols, block);
  formats::for_rows(rows, cols, [&](int64_t r) {
    for (int64_t b = 0; b < nb; ++b) {
      int64_t c0 = b * block, n = std::min<int64_t>(block, cols - c0);
      quantize_block(x + r * cols + c0, n, t.qweight.data() + r * rb.qweight, c0,
                     t.scales.data() + r * rb.scales + b * 4);
    }
  });
  return t;
}

void dequantize_rows(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  if (!valid_block(t.block)) throw Error(fmt::format("{} tensor: bad block {}", kName, t.block));
  formats::RowBytes rb = row_bytes(t.cols, t.block);
  formats::check_packed(t, kName, rb, row0, nrows);
  formats::for_rows(nrows, t.cols, [&](int64_t r) {
    const uint8_t* q = t.qweight.data() + (row0 + r) * rb.qweight;
    const uint8_t* s = t.scales.data() + (row0 + r) * rb.scales;
    float* o = out + r * t.cols;
    for (int64_t c0 = 0, b = 0; c0 < t.cols; c0 += t.block, ++b) {
      float absmax = formats::get_f32(s + 4 * b);
      int64_t n = std::min<int64_t>(t.block, t.cols - c0);
      for (int64_t i = 0; i < n; ++i) o[c0 + i] = kNF4Levels[formats::get_nibble(q, c0 + i)] * absmax;
    }
  });
}

}  // namespace

uint32_t nf4_encode(double v) {
  if (!std::isfinite(v)) throw Error("NF4: cannot encode NaN or Inf");
  return nf4_code(v, midpoints().m);
}

PackedTensor nf4_from_bitsandbytes(const uint8_t* packed, const float* absmax, int64_t rows,
                                   int64_t cols, int block, std::string_view name) {
  formats::check_shape(rows, cols, kName, name);
  if (!valid_block(block) || cols % block != 0) {
    throw Error(fmt::format("tensor '{}': bitsandbytes NF4 import needs a power-of-two block in "
                            "32..4096 dividing cols {} (got block {})",
                            name, cols, block));
  }
  PackedTensor t;
  t.format = kName;
  t.rows = rows;
  t.cols = cols;
  t.block = block;
  int64_t n = rows * cols;
  t.qweight.resize(size_t(n / 2));
  for (int64_t i = 0; i < n / 2; ++i) t.qweight[size_t(i)] = uint8_t((packed[i] >> 4) | (packed[i] << 4));
  t.scales.resize(size_t(n / block * 4));
  if (n) std::memcpy(t.scales.data(), absmax, t.scales.size());
  return t;
}

namespace formats {
void add_nf4_formats(std::vector<FormatInfo>& out) {
  out.push_back({kName, "NF4 (bitsandbytes levels), FP32 absmax per block of 64", 64, 4 + 32.0 / 64,
                 "F32", "", false, quantize, dequantize_rows});
}
}  // namespace formats

}  // namespace nibble

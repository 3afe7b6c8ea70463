// nvfp4 and nvfp4-4over6: block 16, E4M3 block scale, FP32 global scale gs = amax / (448 * 6),
// FP4 E2M1 elements (ties to even). 4over6 also tries s_b = E4M3(bmax / (gs * 4)) per block and
// keeps it only if its squared error is strictly lower.
#include <algorithm>

#include <fmt/format.h>

#include "formats/common.h"
#include "formats/elements.h"
#include "formats/families.h"
#include "formats/level_search.h"
#include "formats/scale_codes.h"

namespace nibble::formats {
namespace {

constexpr int kBlock = 16;

RowBytes row_bytes(int64_t cols) {
  int64_t nb = block_count(cols, kBlock);
  return {nb * kBlock / 2, nb, 0};
}

// Codes of one block for scale code sc; returns the squared error in the original domain.
double encode_block(const float* x, int64_t n, double gs, uint32_t sc, uint8_t* codes) {
  double step = gs * e4m3_table()[sc], terms[kBlock];
  for (int64_t i = 0; i < n; ++i) {
    uint32_t c = step == 0.0 ? 0u : fp4_code_even(double(x[i]) / step);
    codes[i] = uint8_t(c);
    double d = double(x[i]) - kFP4Values[c] * step;
    terms[i] = d * d;
  }
  return sum4(terms, n);
}

template <bool kFourOverSix>
void quantize_block(const float* x, int64_t n, double gs, uint8_t* q, int64_t q0, uint8_t* scale) {
  double bmax = max_abs(x, n);
  uint8_t codes[kBlock], codes4[kBlock];
  uint32_t sc = e4m3_code(bmax / (gs * 6.0));
  double err = encode_block(x, n, gs, sc, codes);
  if (kFourOverSix) {
    uint32_t sc4 = e4m3_code(bmax / (gs * 4.0));
    if (encode_block(x, n, gs, sc4, codes4) < err) sc = sc4, std::copy(codes4, codes4 + n, codes);
  }
  *scale = uint8_t(sc);
  for (int64_t i = 0; i < n; ++i) put_nibble(q, q0 + i, codes[i]);
}

template <bool kFourOverSix>
PackedTensor quantize(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  const char* name = kFourOverSix ? "nvfp4-4over6" : "nvfp4";
  check_shape(rows, cols, name, opt.name);
  resolve_block(opt.block, kBlock, opt.block == kBlock, "fixed at 16", name, opt.name);
  float amax = checked_amax(x, rows, cols, name, opt.name);
  float gs = amax / (448.0f * 6.0f);
  if (gs == 0.0f) gs = 1.0f;  // all zero (or so tiny gs underflows): every scale becomes 0
  RowBytes rb = row_bytes(cols);
  PackedTensor t = new_packed(name, rows, cols, kBlock, rb);
  t.global_scale = gs;
  int64_t nb = block_count(cols, kBlock);
  for_rows(rows, cols, [&](int64_t r) {
    for (int64_t b = 0; b < nb; ++b) {
      int64_t c0 = b * kBlock, n = std::min<int64_t>(kBlock, cols - c0);
      quantize_block<kFourOverSix>(x + r * cols + c0, n, gs, t.qweight.data() + r * rb.qweight, c0,
                                   t.scales.data() + r * rb.scales + b);
    }
  });
  return t;
}

template <bool kFourOverSix>
void dequantize_rows(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  const char* name = kFourOverSix ? "nvfp4-4over6" : "nvfp4";
  if (t.block != kBlock) throw Error(fmt::format("{} tensor: block {} is not 16", name, t.block));
  RowBytes rb = row_bytes(t.cols);
  check_packed(t, name, rb, row0, nrows);
  const float* e4m3 = e4m3_table();
  for_rows(nrows, t.cols, [&](int64_t r) {
    const uint8_t* q = t.qweight.data() + (row0 + r) * rb.qweight;
    const uint8_t* s = t.scales.data() + (row0 + r) * rb.scales;
    float* o = out + r * t.cols;
    for (int64_t c0 = 0, b = 0; c0 < t.cols; c0 += kBlock, ++b) {
      float scale = e4m3[s[b]];
      int64_t n = std::min<int64_t>(kBlock, t.cols - c0);
      for (int64_t i = 0; i < n; ++i) o[c0 + i] = (kFP4Values[get_nibble(q, c0 + i)] * scale) * t.global_scale;
    }
  });
}

}  // namespace

void add_nvfp4_formats(std::vector<FormatInfo>& out) {
  out.push_back({"nvfp4", "NVFP4: FP4 E2M1, block 16, E4M3 scale, FP32 global scale", kBlock, 4.5,
                 "F8_E4M3", "", true, quantize<false>, dequantize_rows<false>});
  out.push_back({"nvfp4-4over6", "NVFP4 storage; per block the better of scale bmax/6 and bmax/4",
                 kBlock, 4.5, "F8_E4M3", "", true, quantize<true>, dequantize_rows<true>});
}

}  // namespace nibble::formats

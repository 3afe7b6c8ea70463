// RaZeR on NVFP4 (paper 000), block 16, FP4 E2M1 codes where 0b1000 (-0) is the special value.
//  nvfp4-razer (weights): byte = E3M3 scale (bits 5..0) | sv magnitude a/b (bit 6) | sv sign
//    (bit 7); gs = amax / (30 * 6); per block the best of sv = +a, -a, +b, -b, each with its own
//    scale E3M3(bmax / (gs * max(6, |sv|))).
//  nvfp4-razer-act (activations): byte = E4M3 scale (bits 6..0) | sv sign (bit 7), |sv| = sv_a;
//    gs = amax / (448 * 6) of the tensor; the scale is fixed first, then +|sv| vs -|sv|.
// Elements go to the nearest level (ties to the smaller magnitude); errors are squared
// differences in the original domain; the first strictly lowest error wins.
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

// Codes of one block at element step `step` (= gs * s_b) with special value sv; returns the
// squared error in the original domain.
double encode_block(const float* x, int64_t n, double step, double sv, uint8_t* codes) {
  double vals[kBlock], terms[kBlock];
  if (step == 0.0) {
    std::fill(codes, codes + n, uint8_t(0));
    std::fill(vals, vals + n, 0.0);
  } else {
    assign_levels<FP4Grid, true>(x, n, 1.0, step, sv, codes, vals);
  }
  for (int64_t i = 0; i < n; ++i) {
    double d = double(x[i]) - vals[i] * step;
    terms[i] = d * d;
  }
  return sum4(terms, n);
}

struct Candidate {
  double sv;
  uint32_t meta;  // bits 7..6 of the scale byte
};

void quantize_weight_block(const float* x, int64_t n, double gs, double a, double b, uint8_t* q,
                           int64_t q0, uint8_t* scale) {
  const Candidate candidates[4] = {{a, 0x00}, {-a, 0x80}, {b, 0x40}, {-b, 0xC0}};
  double bmax = max_abs(x, n), best_err = 0;
  uint8_t codes[kBlock], best[kBlock];
  uint32_t best_byte = 0;
  for (int k = 0; k < 4; ++k) {
    const Candidate& cand = candidates[k];
    uint32_t sc = e3m3_code(bmax / (gs * std::max(6.0, std::fabs(cand.sv))));
    double err = encode_block(x, n, gs * e3m3_table()[sc], cand.sv, codes);
    if (k == 0 || err < best_err) {
      best_err = err, best_byte = sc | cand.meta;
      std::copy(codes, codes + n, best);
    }
  }
  *scale = uint8_t(best_byte);
  for (int64_t i = 0; i < n; ++i) put_nibble(q, q0 + i, best[i]);
}

void quantize_act_block(const float* x, int64_t n, double gs, double sv, uint8_t* q, int64_t q0,
                        uint8_t* scale) {
  uint32_t sc = e4m3_code(max_abs(x, n) / (gs * 6.0));
  double step = gs * e4m3_table()[sc];
  uint8_t plus[kBlock], minus[kBlock];
  double err_plus = encode_block(x, n, step, sv, plus);
  bool neg = encode_block(x, n, step, -sv, minus) < err_plus;
  *scale = uint8_t(sc | (neg ? 0x80u : 0u));
  for (int64_t i = 0; i < n; ++i) put_nibble(q, q0 + i, neg ? minus[i] : plus[i]);
}

PackedTensor make(const char* name, int64_t rows, int64_t cols, float gs) {
  RowBytes rb = row_bytes(cols);
  PackedTensor t = new_packed(name, rows, cols, kBlock, rb);
  t.global_scale = gs;
  return t;
}

// gs = amax / divisor, or 1 where that is 0 (all-zero tensor; every scale then encodes 0).
float global_scale(float amax, float divisor) {
  float gs = amax / divisor;
  return gs == 0.0f ? 1.0f : gs;
}

template <class BlockFn>
void quantize_rows(const float* x, PackedTensor& t, BlockFn&& block_fn) {
  RowBytes rb = row_bytes(t.cols);
  int64_t nb = block_count(t.cols, kBlock);
  for_rows(t.rows, t.cols, [&](int64_t r) {
    for (int64_t b = 0; b < nb; ++b) {
      int64_t c0 = b * kBlock, n = std::min<int64_t>(kBlock, t.cols - c0);
      block_fn(x + r * t.cols + c0, n, t.qweight.data() + r * rb.qweight, c0,
               t.scales.data() + r * rb.scales + b);
    }
  });
}

PackedTensor quantize_weights(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  const char* name = "nvfp4-razer";
  check_shape(rows, cols, name, opt.name);
  resolve_block(opt.block, kBlock, opt.block == kBlock, "fixed at 16", name, opt.name);
  float a = resolve_sv(opt.sv_a, 5.0f, "sv_a", name, opt.name);
  float b = resolve_sv(opt.sv_b, 8.0f, "sv_b", name, opt.name);
  float gs = global_scale(checked_amax(x, rows, cols, name, opt.name), 30.0f * 6.0f);
  PackedTensor t = make(name, rows, cols, gs);
  t.sv_a = a, t.sv_b = b;
  quantize_rows(x, t, [&](const float* xb, int64_t n, uint8_t* q, int64_t q0, uint8_t* s) {
    quantize_weight_block(xb, n, gs, a, b, q, q0, s);
  });
  return t;
}

PackedTensor quantize_acts(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
  const char* name = "nvfp4-razer-act";
  check_shape(rows, cols, name, opt.name);
  resolve_block(opt.block, kBlock, opt.block == kBlock, "fixed at 16", name, opt.name);
  float sv = resolve_sv(opt.sv_a, 5.0f, "sv_a", name, opt.name);
  float gs = global_scale(checked_amax(x, rows, cols, name, opt.name), 448.0f * 6.0f);
  PackedTensor t = make(name, rows, cols, gs);
  t.sv_a = sv;
  quantize_rows(x, t, [&](const float* xb, int64_t n, uint8_t* q, int64_t q0, uint8_t* s) {
    quantize_act_block(xb, n, gs, sv, q, q0, s);
  });
  return t;
}

// Decodes rows; block_lut(byte, lut) fills the 16 values (code value * s_b) of one block.
template <class LutFn>
void dequantize(const PackedTensor& t, const char* name, int64_t row0, int64_t nrows, float* out,
                LutFn&& block_lut) {
  if (t.block != kBlock) throw Error(fmt::format("{} tensor: block {} is not 16", name, t.block));
  RowBytes rb = row_bytes(t.cols);
  check_packed(t, name, rb, row0, nrows);
  for_rows(nrows, t.cols, [&](int64_t r) {
    const uint8_t* q = t.qweight.data() + (row0 + r) * rb.qweight;
    const uint8_t* s = t.scales.data() + (row0 + r) * rb.scales;
    float* o = out + r * t.cols;
    float lut[16];
    for (int64_t c0 = 0, b = 0; c0 < t.cols; c0 += kBlock, ++b) {
      block_lut(s[b], lut);
      int64_t n = std::min<int64_t>(kBlock, t.cols - c0);
      for (int64_t i = 0; i < n; ++i) o[c0 + i] = lut[get_nibble(q, c0 + i)] * t.global_scale;
    }
  });
}

void dequantize_weights(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  const char* name = "nvfp4-razer";
  float a = resolve_sv(t.sv_a, 5.0f, "sv_a", name, "stored");
  float b = resolve_sv(t.sv_b, 8.0f, "sv_b", name, "stored");
  const float* e3m3 = e3m3_table();
  dequantize(t, name, row0, nrows, out, [&](uint8_t byte, float* lut) {
    float s = e3m3[byte & 0x3F];
    float sv = (byte & 0x40 ? b : a) * (byte & 0x80 ? -1.0f : 1.0f);
    for (int c = 0; c < 16; ++c) lut[c] = (c == 8 ? sv : kFP4Values[c]) * s;
  });
}

void dequantize_acts(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
  const char* name = "nvfp4-razer-act";
  float mag = resolve_sv(t.sv_a, 5.0f, "sv_a", name, "stored");
  const float* e4m3 = e4m3_table();
  dequantize(t, name, row0, nrows, out, [&](uint8_t byte, float* lut) {
    float s = e4m3[byte & 0x7F];
    float sv = byte & 0x80 ? -mag : mag;
    for (int c = 0; c < 16; ++c) lut[c] = (c == 8 ? sv : kFP4Values[c]) * s;
  });
}

}  // namespace

void add_nvfp4_razer_formats(std::vector<FormatInfo>& out) {
  out.push_back({"nvfp4-razer", "RaZeR NVFP4 weights: E3M3 scale + 2-bit special value {+-a, +-b}",
                 kBlock, 4.5, "U8", "", false, quantize_weights, dequantize_weights});
  out.push_back({"nvfp4-razer-act", "RaZeR NVFP4 activations: E4M3 scale + special value sign",
                 kBlock, 4.5, "U8", "", true, quantize_acts, dequantize_acts});
}

}  // namespace nibble::formats

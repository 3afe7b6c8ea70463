// Group-128 weight-only FP formats with an FP16 group scale (paper 001):
//  fp4-g128        plain FP4 E2M1 (the baseline), scale word = FP16 scale
//  razer-fp4-g128  FP4 with -0 as the special value, sv in {+-a, +-b} (default {5, 8})
//  razer-fp3-g128  FP3 E2M0 with -0 as the special value (default {3, 6}), bit-plane packed
// For RaZeR the scale word carries the sv sign in bit 15 and the a/b choice in bit 14; the true
// FP16 scale (bits 13..0) is < 2, so ranges that need more fold into gs (gs = amax / max level
// when amax exceeds the largest regular level, else 1). Per candidate: s = bmax / max(level max,
// |sv|), nearest codes, least-squares refit s = sum(x c) / sum(c c) rounded to FP16, nearest
// codes again; the first candidate with the strictly lowest squared error wins.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "formats/common.h"
#include "formats/elements.h"
#include "formats/families.h"
#include "formats/fp3_planes.h"
#include "formats/level_search.h"
#include "formats/scale_codes.h"
#include "nibble/half.h"

namespace nibble::formats {
namespace {

inline uint32_t fp16_code(double a) { return minifloat_code<10, 15, 0x7BFF>(a); }  // a >= 0

struct Candidate {
  double sv;      // special value (unused without one)
  uint16_t meta;  // bits 15..14 of the scale word
};

template <class Grid, bool kSpecial>
inline double level(uint32_t c, double sv) {
  return kSpecial ? razer_value<Grid>(c, sv) : Grid::value(c);
}

constexpr int kMaxBlock = 4096;

// One candidate: codes and scale word (without metadata); returns the squared error.
template <class Grid, bool kSpecial>
double fit_candidate(const float* x, int64_t n, double bmax, double gs, double sv, uint8_t* codes,
                     uint16_t* word) {
  double qmax = kSpecial ? std::max(Grid::kMax, std::fabs(sv)) : Grid::kMax;
  double vals[kMaxBlock], terms[kMaxBlock], squares[kMaxBlock];
  assign_levels<Grid, kSpecial>(x, n, qmax, bmax, sv, codes, vals);  // nearest at s = bmax / qmax
  for (int64_t i = 0; i < n; ++i) terms[i] = double(x[i]) * vals[i], squares[i] = vals[i] * vals[i];
  double num = sum4(terms, n), den = sum4(squares, n);
  double refit = den > 0 ? std::max(0.0, num / den / gs) : 0.0;
  uint32_t sh = fp16_code(refit);
  if (kSpecial) sh = std::min(sh, 0x3FFFu);  // bits 15..14 are metadata (gs keeps s below 2)
  *word = uint16_t(sh);
  double step = gs * double(half_to_float(uint16_t(sh)));
  if (step == 0.0) {
    std::fill(codes, codes + n, uint8_t(0));
    std::fill(vals, vals + n, 0.0);
  } else {
    assign_levels<Grid, kSpecial>(x, n, 1.0, step, sv, codes, vals);
  }
  for (int64_t i = 0; i < n; ++i) {
    double d = double(x[i]) - vals[i] * step;
    terms[i] = d * d;
  }
  return sum4(terms, n);
}

struct Params {
  int block;
  double gs, a, b;
};

// One group: writes codes (0 beyond n) and the scale word.
template <class Grid, bool kSpecial>
void quantize_group(const float* x, int64_t n, const Params& p, uint8_t* codes, uint16_t* word) {
  std::fill(codes, codes + p.block, uint8_t(0));
  *word = 0;
  double bmax = max_abs(x, n);
  if (bmax == 0.0) return;
  const Candidate plain[1] = {{0.0, 0}};
  const Candidate special[4] = {{p.a, 0x0000}, {-p.a, 0x8000}, {p.b, 0x4000}, {-p.b, 0xC000}};
  const Candidate* cands = kSpecial ? special : plain;
  uint8_t trial[kMaxBlock];
  double best = 0;
  for (int k = 0; k < (kSpecial ? 4 : 1); ++k) {
    uint16_t w;
    double err = fit_candidate<Grid, kSpecial>(x, n, bmax, p.gs, cands[k].sv, trial, &w);
    if (k == 0 || err < best) {
      best = err, *word = uint16_t(w | cands[k].meta);
      std::copy(trial, trial + n, codes);
    }
  }
}

// Serialized bytes per group of codes.
template <class Grid>
int64_t group_bytes(int block) { return Grid::kBits == 4 ? block / 2 : block / kFP3ChunkElems * kFP3ChunkBytes; }

template <class Grid>
void pack_group(const uint8_t* codes, int block, uint8_t* out) {
  if constexpr (Grid::kBits == 4) {
    for (int i = 0; i < block; i += 2) out[i / 2] = uint8_t(codes[i] | (codes[i + 1] << 4));
  } else {
    for (int c = 0; c < block / kFP3ChunkElems; ++c) {
      fp3_pack_chunk(codes + c * kFP3ChunkElems, out + c * kFP3ChunkBytes);
    }
  }
}
template <class Grid>
void unpack_group(const uint8_t* in, int block, uint8_t* codes) {
  if constexpr (Grid::kBits == 4) {
    for (int i = 0; i < block; i += 2) codes[i] = in[i / 2] & 15, codes[i + 1] = in[i / 2] >> 4;
  } else {
    for (int c = 0; c < block / kFP3ChunkElems; ++c) {
      fp3_unpack_chunk(in + c * kFP3ChunkBytes, codes + c * kFP3ChunkElems);
    }
  }
}

template <class Grid>
RowBytes row_bytes(int64_t cols, int block) {
  int64_t nb = block_count(cols, block);
  return {nb * group_bytes<Grid>(block), nb * 2, 0};
}

bool valid_block(int b) { return b > 0 && b % 32 == 0 && b <= kMaxBlock; }

template <class Grid, bool kSpecial>
struct Format {
  static const char* name() {
    return !kSpecial ? "fp4-g128" : Grid::kBits == 4 ? "razer-fp4-g128" : "razer-fp3-g128";
  }
  static constexpr float kDefaultA = Grid::kBits == 4 ? 5.0f : 3.0f;
  static constexpr float kDefaultB = Grid::kBits == 4 ? 8.0f : 6.0f;

  static PackedTensor quantize(const float* x, int64_t rows, int64_t cols, const QuantOptions& opt) {
    check_shape(rows, cols, name(), opt.name);
    Params p{};
    p.block = resolve_block(opt.block, 128, valid_block(opt.block), "a multiple of 32 up to 4096",
                            name(), opt.name);
    RowBytes rb = row_bytes<Grid>(cols, p.block);
    PackedTensor t = new_packed(name(), rows, cols, p.block, rb);
    if (kSpecial) {
      t.sv_a = resolve_sv(opt.sv_a, kDefaultA, "sv_a", name(), opt.name);
      t.sv_b = resolve_sv(opt.sv_b, kDefaultB, "sv_b", name(), opt.name);
      p.a = t.sv_a, p.b = t.sv_b;
    }
    float amax = checked_amax(x, rows, cols, name(), opt.name);
    t.global_scale = amax > float(Grid::kMax) ? amax / float(Grid::kMax) : 1.0f;
    p.gs = t.global_scale;
    int64_t nb = block_count(cols, p.block), gb = group_bytes<Grid>(p.block);
    for_rows(rows, cols, [&](int64_t r) {
      uint8_t codes[kMaxBlock];
      for (int64_t g = 0; g < nb; ++g) {
        int64_t c0 = g * p.block, n = std::min<int64_t>(p.block, cols - c0);
        uint16_t word;
        quantize_group<Grid, kSpecial>(x + r * cols + c0, n, p, codes, &word);
        pack_group<Grid>(codes, p.block, t.qweight.data() + r * rb.qweight + g * gb);
        put_u16(t.scales.data() + r * rb.scales + g * 2, word);
      }
    });
    return t;
  }

  static void dequantize_rows(const PackedTensor& t, int64_t row0, int64_t nrows, float* out) {
    if (!valid_block(t.block)) throw Error(fmt::format("{} tensor: bad block {}", name(), t.block));
    float a = 0, b = 0;
    if (kSpecial) {
      a = resolve_sv(t.sv_a, kDefaultA, "sv_a", name(), "stored");
      b = resolve_sv(t.sv_b, kDefaultB, "sv_b", name(), "stored");
    }
    RowBytes rb = row_bytes<Grid>(t.cols, t.block);
    check_packed(t, name(), rb, row0, nrows);
    int64_t gb = group_bytes<Grid>(t.block);
    for_rows(nrows, t.cols, [&](int64_t r) {
      const uint8_t* q = t.qweight.data() + (row0 + r) * rb.qweight;
      const uint8_t* s = t.scales.data() + (row0 + r) * rb.scales;
      float* o = out + r * t.cols;
      uint8_t codes[kMaxBlock];
      float lut[16];
      for (int64_t c0 = 0, g = 0; c0 < t.cols; c0 += t.block, ++g) {
        uint16_t word = get_u16(s + 2 * g);
        float scale = half_to_float(kSpecial ? uint16_t(word & 0x3FFF) : word);
        float sv = (word & 0x4000 ? b : a) * (word & 0x8000 ? -1.0f : 1.0f);
        for (uint32_t c = 0; c < (1u << Grid::kBits); ++c) lut[c] = float(level<Grid, kSpecial>(c, sv)) * scale;
        unpack_group<Grid>(q + g * gb, t.block, codes);
        int64_t n = std::min<int64_t>(t.block, t.cols - c0);
        for (int64_t i = 0; i < n; ++i) o[c0 + i] = lut[codes[i]] * t.global_scale;
      }
    });
  }
};

}  // namespace

void add_group_fp_formats(std::vector<FormatInfo>& out) {
  using Plain = Format<FP4Grid, false>;
  using RaZeR4 = Format<FP4Grid, true>;
  using RaZeR3 = Format<FP3Grid, true>;
  out.push_back({"fp4-g128", "FP4 E2M1, group 128, FP16 scale (least-squares refit); RaZeR baseline",
                 128, 4 + 16.0 / 128, "F16", "", false, Plain::quantize, Plain::dequantize_rows});
  out.push_back({"razer-fp4-g128", "RaZeR FP4 weight-only, group 128, FP16 scale carrying 2-bit sv",
                 128, 4 + 16.0 / 128, "U16", "", false, RaZeR4::quantize, RaZeR4::dequantize_rows});
  out.push_back({"razer-fp3-g128", "RaZeR FP3 (E2M0) weight-only, group 128, bit-plane packed", 128,
                 3 + 16.0 / 128, "U16", "", false, RaZeR3::quantize, RaZeR3::dequantize_rows});
}

}  // namespace nibble::formats

// Two-pass decomposition of NVFP4-RaZeR weights into two plain NVFP4 tensors.
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "nibble/error.h"
#include "nibble/two_pass.h"
#include "nibble/codec.h"

namespace nibble {
namespace {

constexpr std::array<float, 8> kFp4Magnitudes = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
constexpr uint8_t kSvCode = 0b1000;

// The E4M3 code of a scale that must be exactly representable (true for every use below).
uint8_t e4m3_exact(double v, const char* what, int64_t block) {
  const uint32_t code = kFP8E4M3.encode(v);
  if (kFP8E4M3.decode(code) != v)
    throw Error(fmt::format("two-pass split: {} {} of block {} is not exactly representable in "
                            "E4M3", what, v, block));
  return uint8_t(code);
}

uint8_t get_nibble(const std::vector<uint8_t>& packed, int64_t i) {
  return uint8_t((packed[size_t(i >> 1)] >> ((i & 1) * 4)) & 0xF);
}

void set_nibble(std::vector<uint8_t>& packed, int64_t i, uint8_t code) {
  uint8_t& b = packed[size_t(i >> 1)];
  b = (i & 1) ? uint8_t((b & 0x0F) | (code << 4)) : uint8_t((b & 0xF0) | code);
}

void check_razer_layout(const PackedTensor& t) {
  if (t.format != "nvfp4-razer")
    throw Error(fmt::format("two-pass split: tensor is '{}', expected nvfp4-razer", t.format));
  if (t.block != 16 || t.cols % 16 != 0 || t.rows < 0)
    throw Error(fmt::format("two-pass split: needs block 16 and cols a multiple of 16 (got block "
                            "{}, {} x {})",
                            t.block, t.rows, t.cols));
  const size_t n = size_t(t.rows * t.cols);
  if (t.qweight.size() != n / 2 || t.scales.size() != n / 16)
    throw Error(fmt::format("two-pass split: qweight/scales sizes {}/{} do not match {} x {}",
                            t.qweight.size(), t.scales.size(), t.rows, t.cols));
}

PackedTensor empty_nvfp4_like(const PackedTensor& t) {
  PackedTensor p;
  p.format = "nvfp4";
  p.rows = t.rows;
  p.cols = t.cols;
  p.block = 16;
  p.global_scale = t.global_scale;
  p.qweight.assign(t.qweight.size(), 0);
  p.scales.assign(t.scales.size(), 0);
  return p;
}

}  // namespace

SvSplit split_special_value(float magnitude) {
  SvSplit best{magnitude};
  auto rank = [](const SvSplit& s) {  // lower is better, see the header
    return std::array<double, 3>{s.comp_value == 0 ? 0.0 : 1.0, double(s.comp_scale_log2),
                                 -double(s.main_value)};
  };
  for (float x1 : kFp4Magnitudes) {
    for (int k = 0; k <= 2; ++k) {
      for (float q : kFp4Magnitudes) {
        if (x1 + std::ldexp(q, k) != magnitude || (q == 0 && k != 0)) continue;
        SvSplit s{magnitude, true, x1, q, k};
        if (!best.expressible || rank(s) < rank(best)) best = s;
      }
    }
  }
  return best;
}

TwoPassWeights split_two_pass(const PackedTensor& razer) {
  check_razer_layout(razer);
  const std::array<SvSplit, 2> splits = {split_special_value(razer.sv_a),
                                         split_special_value(razer.sv_b)};
  TwoPassWeights out{empty_nvfp4_like(razer), empty_nvfp4_like(razer)};
  const int64_t nblocks = int64_t(razer.scales.size());
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t meta = razer.scales[size_t(b)];
    const bool sv_negative = meta & 0x80;
    const SvSplit& split = splits[(meta >> 6) & 1];
    const double scale = kE3M3.decode(meta & 0x3F);
    out.main.scales[size_t(b)] = e4m3_exact(scale, "B_main scale", b);
    bool block_uses_comp = false;
    for (int64_t i = b * 16; i < b * 16 + 16; ++i) {
      const uint8_t code = get_nibble(razer.qweight, i);
      if (code != kSvCode) {
        set_nibble(out.main.qweight, i, code);
        continue;
      }
      if (!split.expressible)
        throw Error(fmt::format("two-pass split: special value {} (block {}) is not a sum of two "
                                "FP4 values on power-of-two scales",
                                split.magnitude, b));
      const uint8_t sign = sv_negative ? 0x8 : 0x0;
      set_nibble(out.main.qweight, i, uint8_t(sign | kFP4E2M1.encode(split.main_value)));
      if (split.comp_value != 0) {
        set_nibble(out.comp.qweight, i, uint8_t(sign | kFP4E2M1.encode(split.comp_value)));
        block_uses_comp = true;
      }
    }
    if (block_uses_comp)
      out.comp.scales[size_t(b)] =
          e4m3_exact(std::ldexp(scale, split.comp_scale_log2), "B_comp scale", b);
  }
  return out;
}

double nonzero_fraction(const PackedTensor& t) {
  const int64_t n = t.rows * t.cols;
  if (n <= 0) return 0.0;
  int64_t nz = 0;
  for (int64_t i = 0; i < n; ++i) nz += (get_nibble(t.qweight, i) & 0x7) != 0;
  return double(nz) / double(n);
}

}  // namespace nibble

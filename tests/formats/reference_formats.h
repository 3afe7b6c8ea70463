#pragma once
// A deliberately simple float64 reference of every block format, written from
// ../shared/FORMATS.md and docs/formats.md independently of src/formats: value tables and
// brute-force nearest-level searches instead of bit tricks, plain loops, no SIMD, no threads.
#include <cstdint>
#include <string_view>
#include <vector>

#include "nibble/format.h"

namespace ref {

struct Options {
  int block = 0;             // 0: default
  float sv_a = 0, sv_b = 0;  // 0: default
};

nibble::PackedTensor quantize(std::string_view format, const std::vector<float>& x, int64_t rows,
                              int64_t cols, const Options& opt = {});
std::vector<float> dequantize(const nibble::PackedTensor& t);

// Element / scale tables by code (non-negative codes in increasing value order where it applies).
double e4m3_value(int code);    // 0..255 (0x7F / 0xFF are NaN)
double e3m3_value(int code);    // 0..63
double e8m0_value(int code);    // 0..254
double fp16_value(int code);    // 0..0xFFFF finite codes
double fp4_value(int code);     // 0..15
double fp3_value(int code);     // 0..7

}  // namespace ref

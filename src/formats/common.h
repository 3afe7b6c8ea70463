#pragma once
// Shared plumbing of the block formats: input checks, maxima, row layout, packed-tensor
// validation and the row-parallel loop. Internal to src/formats.
//
// Every quantizer decides codes in float64 from exact real-number comparisons, so the fast path
// and the float64 reference agree byte for byte. FMA contraction would change some roundings of
// the error sums, hence the pragma (the build uses -std=gnu++20, whose default is to contract).
#pragma GCC optimize("fp-contract=off")

#include <bit>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "nibble/error.h"
#include "nibble/format.h"

namespace nibble::formats {

// |x| as its bit pattern: for finite floats the unsigned order is the numeric order, and every
// NaN / Inf compares above every finite value.
inline uint32_t abs_bits(float x) { return std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu; }
inline constexpr uint32_t kInfBits = 0x7F800000u;

// max |x| over n floats; NaN / Inf give a value >= kInfBits (as bits).
inline uint32_t max_abs_bits(const float* x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b = abs_bits(x[i]);
    m = b > m ? b : m;
  }
  return m;
}
inline float max_abs(const float* x, int64_t n) { return std::bit_cast<float>(max_abs_bits(x, n)); }

// Throws nibble::Error naming the tensor, the format and the first non-finite element; returns
// max |x| over the whole tensor otherwise.
float checked_amax(const float* x, int64_t rows, int64_t cols, std::string_view format,
                   std::string_view tensor);

// Checks rows / cols (non-negative) and the option block against what the format accepts.
void check_shape(int64_t rows, int64_t cols, std::string_view format, std::string_view tensor);

inline int64_t block_count(int64_t cols, int block) { return block > 0 ? (cols + block - 1) / block : 1; }

// Bytes per row of each plane; check_packed throws nibble::Error if t does not hold exactly
// that, or if [row0, row0 + nrows) is outside t.
struct RowBytes {
  int64_t qweight = 0, scales = 0, aux = 0;
};
void check_packed(const PackedTensor& t, std::string_view format, RowBytes per_row, int64_t row0,
                  int64_t nrows);

// A zero-filled PackedTensor of `format` and shape [rows, cols], each plane sized per_row * rows.
inline PackedTensor new_packed(std::string_view format, int64_t rows, int64_t cols, int block,
                               RowBytes per_row) {
  PackedTensor t;
  t.format = std::string(format);
  t.rows = rows;
  t.cols = cols;
  t.block = block;
  t.qweight.assign(size_t(rows * per_row.qweight), 0);
  t.scales.assign(size_t(rows * per_row.scales), 0);
  t.aux.assign(size_t(rows * per_row.aux), 0);
  return t;
}

// Element codes packed two per byte, element 2j in the low nibble.
inline void put_nibble(uint8_t* row, int64_t i, uint32_t code) {
  row[i >> 1] |= uint8_t(code << ((i & 1) * 4));
}
inline uint32_t get_nibble(const uint8_t* row, int64_t i) { return (row[i >> 1] >> ((i & 1) * 4)) & 15u; }

inline void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }  // little-endian host
inline uint16_t get_u16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
inline void put_f32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }
inline float get_f32(const uint8_t* p) { float v; std::memcpy(&v, p, 4); return v; }

// Runs f(row) for every row, in parallel when the work is large enough to pay for the threads
// (a single-row call, as the CPU GEMV makes, never enters OpenMP). An exception thrown by f is
// carried out of the parallel region and rethrown (the lowest failing row's, for determinism).
template <class F>
void for_rows(int64_t rows, int64_t cols, F&& f) {
  constexpr int64_t kParallelElements = 1 << 15;
  if (rows <= 1 || rows * cols < kParallelElements) {
    for (int64_t r = 0; r < rows; ++r) f(r);
    return;
  }
  std::exception_ptr error;
  int64_t error_row = rows;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    try {
      f(r);
    } catch (...) {
#pragma omp critical(nibble_formats_for_rows)
      if (r < error_row) error_row = r, error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Special-value pair of a RaZeR tensor: 0 means the default; each must be a multiple of 0.5 in
// [2.5, 9.5]. Throws nibble::Error naming the tensor and the field.
float resolve_sv(float requested, float fallback, const char* field, std::string_view format,
                 std::string_view tensor);

// Block size: 0 means the default; otherwise `accept` must hold. Throws nibble::Error.
int resolve_block(int requested, int fallback, bool accept, const char* rule,
                  std::string_view format, std::string_view tensor);

}  // namespace nibble::formats

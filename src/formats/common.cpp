// Input checks and packed-tensor validation shared by the block formats.
#include "formats/common.h"

#include <cmath>

#include <fmt/format.h>

namespace nibble::formats {

float checked_amax(const float* x, int64_t rows, int64_t cols, std::string_view format,
                   std::string_view tensor) {
  int64_t n = rows * cols;
  uint32_t m = 0;
  if (n >= (1 << 16)) {
#pragma omp parallel for reduction(max : m) schedule(static)
    for (int64_t i = 0; i < n; ++i) m = std::max(m, abs_bits(x[i]));
  } else {
    m = max_abs_bits(x, n);
  }
  if (m < kInfBits) return std::bit_cast<float>(m);
  for (int64_t i = 0; i < n; ++i) {
    if (abs_bits(x[i]) >= kInfBits) {
      throw Error(fmt::format("tensor '{}': element [{}, {}] is {}; cannot quantize to {}", tensor,
                              i / cols, i % cols, std::isnan(x[i]) ? "NaN" : "Inf", format));
    }
  }
  return std::bit_cast<float>(m);  // unreachable
}

void check_shape(int64_t rows, int64_t cols, std::string_view format, std::string_view tensor) {
  if (rows < 0 || cols < 0 || (cols > 0 && rows > (int64_t(1) << 62) / cols)) {
    throw Error(fmt::format("tensor '{}': bad shape [{}, {}] for {}", tensor, rows, cols, format));
  }
}

void check_packed(const PackedTensor& t, std::string_view format, RowBytes per_row, int64_t row0,
                  int64_t nrows) {
  auto fail = [&](std::string_view what) {
    throw Error(fmt::format("{} tensor [{}, {}] (block {}): {}", format, t.rows, t.cols, t.block, what));
  };
  if (t.format != format) fail(fmt::format("holds format '{}'", t.format));
  if (t.rows < 0 || t.cols < 0) fail("negative shape");
  auto check = [&](const std::vector<uint8_t>& plane, int64_t bytes, const char* name) {
    if (int64_t(plane.size()) != t.rows * bytes) {
      fail(fmt::format("{} has {} bytes, expected {}", name, plane.size(), t.rows * bytes));
    }
  };
  check(t.qweight, per_row.qweight, "qweight");
  check(t.scales, per_row.scales, "scales");
  check(t.aux, per_row.aux, "aux");
  if (row0 < 0 || nrows < 0 || row0 + nrows > t.rows) {
    fail(fmt::format("rows [{}, {}) out of range", row0, row0 + nrows));
  }
}

float resolve_sv(float requested, float fallback, const char* field, std::string_view format,
                 std::string_view tensor) {
  float v = requested == 0.0f ? fallback : requested;
  double twice = double(v) * 2.0;
  if (!(v >= 2.5f && v <= 9.5f) || twice != std::floor(twice)) {
    throw Error(fmt::format("tensor '{}': {} {} = {} is not a multiple of 0.5 in [2.5, 9.5]",
                            tensor, format, field, v));
  }
  return v;
}

int resolve_block(int requested, int fallback, bool accept, const char* rule,
                  std::string_view format, std::string_view tensor) {
  if (requested == 0) return fallback;
  if (!accept) {
    throw Error(fmt::format("tensor '{}': block {} is not allowed for {} ({})", tensor, requested,
                            format, rule));
  }
  return requested;
}

}  // namespace nibble::formats

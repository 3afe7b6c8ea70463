#include "model/cuda/fp16_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "nibble/error.h"
#include "nibble/half.h"

namespace nibble::cuda {

std::vector<uint16_t> dequantize_fp16(const PackedTensor& t, std::string_view name) {
  const FormatInfo& f = find_format(t.format);
  std::vector<uint16_t> out(size_t(t.rows * t.cols));
  const int64_t rows_per_block = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(1, t.cols));
  const int64_t blocks = (t.rows + rows_per_block - 1) / rows_per_block;
  std::vector<std::string> bad(static_cast<size_t>(blocks));  // the first bad element of each block
  // Blocks in parallel (an 8B model's 1 GB embedding took ~4 s on one thread); inside an enclosing
  // parallel region (DeviceModel's layers) this runs on the calling thread.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * rows_per_block, n = std::min(rows_per_block, t.rows - r0);
    std::vector<float> buf(size_t(n * t.cols));
    f.dequantize_rows(t, r0, n, buf.data());
    for (size_t i = 0; i < buf.size(); ++i) {
      const float v = buf[i];
      if (!std::isfinite(v) || std::fabs(v) > 65504.0f) {
        bad[size_t(b)] = fmt::format("{}: element [{}, {}] = {} does not fit in FP16 (the CUDA path holds {} weights as FP16)",
                                     name, r0 + int64_t(i) / t.cols, int64_t(i) % t.cols, v, t.format);
        break;
      }
      out[size_t(r0 * t.cols) + i] = float_to_half(v);
    }
  }
  for (const std::string& e : bad)
    if (!e.empty()) throw Error(e);
  return out;
}

PackedTensor as_fp16(const PackedTensor& t, std::string_view name) {
  PackedTensor out;
  out.format = "fp16";
  out.rows = t.rows, out.cols = t.cols;
  const std::vector<uint16_t> h = dequantize_fp16(t, name);
  out.qweight.resize(h.size() * 2);
  std::memcpy(out.qweight.data(), h.data(), out.qweight.size());
  return out;
}

}  // namespace nibble::cuda

// The format registry of format.h: the list, lookup by name, and the conveniences.
#include <fmt/format.h>

#include "formats/families.h"
#include "nibble/error.h"

namespace nibble {

const std::vector<FormatInfo>& all_formats() {
  static const std::vector<FormatInfo> list = [] {
    std::vector<FormatInfo> v;
    formats::add_plain_float_formats(v);
    formats::add_fp8_formats(v);
    formats::add_nestedfp_formats(v);
    formats::add_int4_formats(v);
    formats::add_nf4_formats(v);
    formats::add_mxfp4_formats(v);
    formats::add_nvfp4_formats(v);
    formats::add_nvfp4_razer_formats(v);
    formats::add_group_fp_formats(v);
    return v;
  }();
  return list;
}

const FormatInfo& find_format(std::string_view name) {
  std::string known;
  for (const FormatInfo& f : all_formats()) {
    if (f.name == name) return f;
    known += known.empty() ? "" : ", ";
    known += f.name;
  }
  throw Error(fmt::format("unknown number format '{}' (known: {})", name, known));
}

PackedTensor quantize(std::string_view format, const float* x, int64_t rows, int64_t cols,
                      const QuantOptions& opt) {
  return find_format(format).quantize(x, rows, cols, opt);
}

std::vector<float> dequantize(const PackedTensor& t) {
  const FormatInfo& f = find_format(t.format);
  if (t.rows < 0 || t.cols < 0) throw Error(fmt::format("{} tensor: negative shape", t.format));
  std::vector<float> out(size_t(t.rows * t.cols));
  f.dequantize_rows(t, 0, t.rows, out.data());
  return out;
}

}  // namespace nibble

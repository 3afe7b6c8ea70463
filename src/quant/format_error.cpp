// Quantize -> dequantize round trips of one data set through many formats.
#include <algorithm>
#include <cmath>

#include "nibble/error.h"
#include "nibble/error_stats.h"
#include "nibble/progress.h"

namespace nibble {

ErrorStats format_error(const std::vector<ErrorSample>& samples, std::string_view format,
                        const QuantOptions& opt) {
  ErrorStats total;
  for (const auto& s : samples) {
    QuantOptions o = opt;
    o.name = s.name;
    PackedTensor t = quantize(format, s.values.data(), s.rows, s.cols, o);
    std::vector<float> back = dequantize(t);
    if (back.size() != s.values.size())
      throw Error("format " + std::string(format) + " returned " + std::to_string(back.size()) +
                  " values for " + s.name + " (expected " + std::to_string(s.values.size()) + ")");
    total.add(s.values.data(), back.data(), int64_t(back.size()));
  }
  return total;
}

std::vector<FormatError> measure_formats(const std::vector<ErrorSample>& samples,
                                         const std::vector<std::string>& formats,
                                         const QuantOptions& opt, bool show_progress) {
  std::vector<FormatError> out;
  std::optional<Progress> bar;
  if (show_progress) bar.emplace("formats", int64_t(formats.size()));
  for (const auto& name : formats) {
    const FormatInfo& info = find_format(name);  // unknown names throw before any work
    FormatError r;
    r.format = name;
    r.bits_per_weight = info.bits_per_weight;
    r.block = opt.block ? opt.block : info.default_block;
    try {
      r.stats = format_error(samples, name, opt);
    } catch (const Error& e) {
      r.rejected = e.what();
    }
    out.push_back(std::move(r));
    if (bar) bar->add();
  }
  if (bar) bar->finish();
  std::stable_sort(out.begin(), out.end(), [](const FormatError& a, const FormatError& b) {
    if (a.rejected.empty() != b.rejected.empty()) return a.rejected.empty();
    return a.rejected.empty() && a.stats.rel_mse() < b.stats.rel_mse();
  });
  return out;
}

}  // namespace nibble

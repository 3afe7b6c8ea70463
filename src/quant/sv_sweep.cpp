// The special-value sweep of paper 000, Fig. 3: NVFP4-RaZeR error as the special values vary,
// normalized to plain NVFP4 on the same data.
#include "nibble/error_stats.h"
#include "nibble/progress.h"

namespace nibble {

std::vector<float> special_value_grid() {
  std::vector<float> g;
  for (int h = 5; h <= 19; ++h) g.push_back(0.5f * float(h));
  return g;
}

SvSweep sweep_special_values(const std::vector<ErrorSample>& samples, bool show_progress) {
  const std::vector<float> grid = special_value_grid();
  std::optional<Progress> bar;
  if (show_progress) bar.emplace("sweep-sv", int64_t(1 + 2 * grid.size()));
  SvSweep sweep;
  sweep.nvfp4_rel_mse = format_error(samples, "nvfp4").rel_mse();
  if (bar) bar->add();
  auto point = [&](float a, float b, float swept) {
    QuantOptions opt;
    opt.sv_a = a;
    opt.sv_b = b;
    const double e = format_error(samples, "nvfp4-razer", opt).rel_mse();
    if (bar) bar->add();
    return SvSweepPoint{swept, e, e / sweep.nvfp4_rel_mse};
  };
  for (float sv : grid) sweep.single.push_back(point(sv, sv, sv));  // one pair: ±sv only
  for (float sv : grid) sweep.with_five.push_back(point(5.0f, sv, sv));
  if (bar) bar->finish();
  return sweep;
}

}  // namespace nibble

// `nibble formats decoder-table` (RaZeR decoder registers) and `nibble formats two-pass`
// (two-pass W4A4 split of NVFP4-RaZeR weights into plain NVFP4).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cmd_formats_common.h"
#include "nibble/razer_decoder.h"
#include "nibble/two_pass.h"

namespace nibble::cli::formats {
namespace {

void print_decoder_table(float a, float b, float act) {
  using namespace razer_hw;
  const auto w = WeightDecoder::for_pair(a, b);
  const auto x = ActivationDecoder::for_magnitude(act);
  std::printf("weight decoder (special values {+-%g, +-%g}):\n", a, b);
  std::printf("  register  bits  offset  magnitude (6.0 + offset)\n");
  for (auto [name, reg] : {std::pair{"OF_0", w.of0()}, std::pair{"OF_1", w.of1()}})
    std::printf("  %-8s  %s  %+5.1f  %5.1f\n", name, register_bits(reg).c_str(),
                0.5 * offset_half_units(reg), 0.5 * special_magnitude_half_units(reg));
  std::printf("  metadata (scale bits 7,6) -> code 0b1000 decodes to\n");
  for (int sign = 0; sign < 2; ++sign)
    for (int sel = 0; sel < 2; ++sel)
      std::printf("    sign=%d select=%d  ->  %+5.1f\n", sign, sel,
                  w.decode(kRedundantZeroCode, sel, sign).value());
  std::printf("activation decoder (special value +-%g):\n", act);
  std::printf("  OF        %s  %+5.1f  %5.1f\n", register_bits(x.of()).c_str(),
              0.5 * offset_half_units(x.of()), 0.5 * special_magnitude_half_units(x.of()));
}

struct TwoPassArgs {
  std::string sv;
  int64_t rows = 256, cols = 4096;
  std::optional<uint64_t> seed;
  bool json = false;
};

struct PairReport {
  float a, b;
  bool expressible, paper_scheme;
  double sv_fraction = 0, comp_nonzero = 0, max_rel_diff = 0;
};

// Quantizes the data with the pair, splits it, and checks main + comp against the RaZeR decode.
PairReport measure_pair(const ErrorSample& s, float a, float b) {
  const SvSplit sa = split_special_value(a), sb = split_special_value(b);
  PairReport r{a, b, sa.expressible && sb.expressible,
               sa.comp_scale_log2 == 0 && sb.comp_scale_log2 == 0};
  if (!r.expressible) return r;
  QuantOptions opt;
  opt.sv_a = a;
  opt.sv_b = b;
  opt.name = s.name;
  PackedTensor w = quantize("nvfp4-razer", s.values.data(), s.rows, s.cols, opt);
  TwoPassWeights parts = split_two_pass(w);
  std::vector<float> ref = dequantize(w), m = dequantize(parts.main), c = dequantize(parts.comp);
  double amax = 0, diff = 0;
  int64_t sv_count = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    amax = std::max(amax, std::fabs(double(ref[i])));
    diff = std::max(diff, std::fabs(double(m[i]) + double(c[i]) - double(ref[i])));
  }
  for (int64_t i = 0; i < w.rows * w.cols; ++i)
    sv_count += ((w.qweight[size_t(i / 2)] >> (i % 2 * 4)) & 0xF) == 0b1000;
  r.sv_fraction = double(sv_count) / double(w.rows * w.cols);
  r.comp_nonzero = nonzero_fraction(parts.comp);
  r.max_rel_diff = amax > 0 ? diff / amax : diff;
  return r;
}

void run_two_pass(const TwoPassArgs& args) {
  std::vector<std::pair<float, float>> pairs;
  if (!args.sv.empty())
    pairs.push_back(parse_sv_pair(args.sv, "--sv"));
  else
    for (float v : special_value_grid()) pairs.push_back({5.0f, v});
  const LabData data = load_lab_data("gaussian", args.rows, args.cols, args.seed);
  nlohmann::json j = {{"data", data.description}, {"magnitudes", nlohmann::json::array()},
                      {"pairs", nlohmann::json::array()}};
  if (!args.json) {
    std::printf("special-value magnitude -> B_main part + B_comp part x (B_comp scale factor)\n");
    std::printf("%6s %8s %8s %8s  %s\n", "|sv|", "main", "comp", "factor", "exact");
  }
  for (float v : special_value_grid()) {
    const SvSplit s = split_special_value(v);
    const char* how = !s.expressible            ? "no"
                      : s.comp_scale_log2 == 0 ? "yes (shared scales, paper D.3)"
                                               : "yes (B_comp block scale x2^k)";
    j["magnitudes"].push_back({{"sv", v}, {"expressible", s.expressible}, {"main", s.main_value},
                               {"comp", s.comp_value}, {"comp_scale_log2", s.comp_scale_log2}});
    if (!args.json)
      std::printf("%6.1f %8.1f %8.1f %8d  %s\n", v, s.main_value, s.comp_value,
                  1 << s.comp_scale_log2, how);
  }
  if (!args.json) {
    std::printf("\nper pair on %s:\n", data.description.c_str());
    std::printf("%5s %5s %6s %6s %10s %12s %14s\n", "a", "b", "exact", "paper", "sv elems",
                "B_comp nz", "max|diff|/amax");
  }
  for (auto [a, b] : pairs) {
    const PairReport r = measure_pair(data.samples[0], a, b);
    j["pairs"].push_back({{"a", a}, {"b", b}, {"expressible", r.expressible},
                          {"paper_scheme", r.paper_scheme}, {"sv_fraction", r.sv_fraction},
                          {"comp_nonzero_fraction", r.comp_nonzero},
                          {"max_rel_diff", r.max_rel_diff}});
    if (!args.json)
      std::printf("%5.1f %5.1f %6s %6s %10.5f %12.5f %14.3e\n", a, b,
                  r.expressible ? "yes" : "no", r.paper_scheme ? "yes" : "no", r.sv_fraction,
                  r.comp_nonzero, r.max_rel_diff);
  }
  if (args.json) std::printf("%s\n", j.dump(2).c_str());
}

}  // namespace

void add_hardware_commands(CLI::App& formats) {
  auto sv = std::make_shared<std::string>("5,8");
  auto act = std::make_shared<float>(5.0f);
  auto* table = formats.add_subcommand(
      "decoder-table", "RaZeR tensor-core decoder registers for a special-value pair");
  table->add_option("--sv", *sv, "weight special-value pair A,B")->capture_default_str();
  table->add_option("--act-sv", *act, "activation special value")->capture_default_str();
  table->callback([sv, act] {
    auto [a, b] = parse_sv_pair(*sv, "--sv");
    print_decoder_table(a, b, *act);
  });

  auto args = std::make_shared<TwoPassArgs>();
  auto* two = formats.add_subcommand(
      "two-pass", "Two-pass W4A4 split of NVFP4-RaZeR into B_main + B_comp (paper 000 D.3)");
  two->add_option("--sv", args->sv, "one pair A,B (default: {5, b} for every b in 2.5..9.5)");
  two->add_option("--rows", args->rows, "rows of the gaussian test matrix")->capture_default_str();
  two->add_option("--cols", args->cols, "cols of the gaussian test matrix")->capture_default_str();
  two->add_option("--seed", args->seed, "seed (default: fresh)");
  two->add_flag("--json", args->json, "print JSON");
  two->callback([args] { run_two_pass(*args); });
}

}  // namespace nibble::cli::formats

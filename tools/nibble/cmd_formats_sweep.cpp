// `nibble formats sweep-sv`: paper 000 Fig. 3, NVFP4-RaZeR error as the special values vary.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cmd_formats_common.h"

namespace nibble::cli::formats {
namespace {

struct SweepArgs {
  std::string dist = "gaussian";
  int64_t rows = 1024, cols = 4096;
  std::optional<uint64_t> seed;
  bool json = false;
};

const SvSweepPoint& minimum(const std::vector<SvSweepPoint>& pts) {
  return *std::min_element(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
    return a.rel_mse < b.rel_mse;
  });
}

void print_sweep(const LabData& data, const SvSweep& s) {
  std::printf("data: %s\n", data.description.c_str());
  std::printf("plain NVFP4 rel MSE %.6e (= 1.0 below)\n", s.nvfp4_rel_mse);
  std::printf("%6s %14s %14s\n", "sv", "{+-sv}", "{+-5, +-sv}");
  for (size_t i = 0; i < s.single.size(); ++i)
    std::printf("%6.1f %14.4f %14.4f\n", s.single[i].sv, s.single[i].normalized,
                s.with_five[i].normalized);
  std::printf("best single pair: +-%.1f (%.4f); best second pair on top of +-5: +-%.1f (%.4f)\n",
              minimum(s.single).sv, minimum(s.single).normalized, minimum(s.with_five).sv,
              minimum(s.with_five).normalized);
}

nlohmann::json sweep_json(const LabData& data, const SvSweep& s) {
  auto points = [](const std::vector<SvSweepPoint>& pts) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& p : pts)
      a.push_back({{"sv", p.sv}, {"rel_mse", p.rel_mse}, {"normalized", p.normalized}});
    return a;
  };
  nlohmann::json j = {{"data", data.description},
                      {"nvfp4_rel_mse", s.nvfp4_rel_mse},
                      {"single_pair", points(s.single)},
                      {"on_top_of_5", points(s.with_five)},
                      {"best_single", minimum(s.single).sv},
                      {"best_on_top_of_5", minimum(s.with_five).sv}};
  if (data.seed) j["seed"] = *data.seed;
  return j;
}

}  // namespace

void add_sweep_command(CLI::App& formats) {
  auto args = std::make_shared<SweepArgs>();
  auto* cmd = formats.add_subcommand(
      "sweep-sv", "NVFP4-RaZeR error vs special-value magnitude, normalized to NVFP4 (paper 000 "
                  "Fig. 3)");
  cmd->add_option("--dist", args->dist,
                  "gaussian | laplace | student-t:NU | FILE.safetensors[:TENSOR] | DIR[:TENSOR]")
      ->capture_default_str();
  cmd->add_option("--rows", args->rows, "rows of generated data")->capture_default_str();
  cmd->add_option("--cols", args->cols, "cols of generated data")->capture_default_str();
  cmd->add_option("--seed", args->seed, "seed for generated data (default: fresh)");
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->callback([args] {
    LabData data = load_lab_data(args->dist, args->rows, args->cols, args->seed);
    SvSweep s = sweep_special_values(data.samples, /*show_progress=*/true);
    if (args->json)
      std::printf("%s\n", sweep_json(data, s).dump(2).c_str());
    else
      print_sweep(data, s);
  });
}

}  // namespace nibble::cli::formats

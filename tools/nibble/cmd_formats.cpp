// `nibble formats ...`: the quantization-error laboratory. This file: the parent command,
// `list` and `error`; the other subcommands live in cmd_formats_*.cpp.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cmd_formats_common.h"
#include "command.h"
#include "nibble/format.h"

namespace nibble::cli::formats {
namespace {

using json = nlohmann::json;

void print_list() {
  std::printf("%-20s %9s %6s  %s\n", "format", "bits/w", "block", "description");
  for (const auto& f : all_formats())
    std::printf("%-20s %9.3f %6d  %.*s\n", std::string(f.name).c_str(), f.bits_per_weight,
                f.default_block, int(f.description.size()), f.description.data());
}

struct ErrorArgs {
  std::string dist = "gaussian";
  int64_t rows = 1024, cols = 4096;
  std::string formats;
  std::optional<uint64_t> seed;
  bool json = false;
};

json results_json(const LabData& data, const std::vector<FormatError>& results) {
  json j = {{"data", data.description}};
  if (data.seed) j["seed"] = *data.seed;
  j["results"] = json::array();
  for (const auto& r : results) {
    json e = {{"format", r.format}, {"bits_per_weight", r.bits_per_weight}, {"block", r.block}};
    if (r.rejected.empty()) {
      e["rel_mse"] = r.stats.rel_mse();
      e["sqnr_db"] = r.stats.sqnr_db();
      e["values"] = r.stats.count;
    } else {
      e["rejected"] = r.rejected;
    }
    j["results"].push_back(e);
  }
  return j;
}

void print_results(const LabData& data, const std::vector<FormatError>& results) {
  std::printf("data: %s\n", data.description.c_str());
  std::printf("%-20s %7s %6s %14s %9s\n", "format", "bits/w", "block", "rel MSE", "SQNR dB");
  for (const auto& r : results) {
    if (r.rejected.empty())
      std::printf("%-20s %7.3f %6d %14.6e %9.3f\n", r.format.c_str(), r.bits_per_weight, r.block,
                  r.stats.rel_mse(), r.stats.sqnr_db());
    else
      std::printf("%-20s %7.3f %6d   rejected: %s\n", r.format.c_str(), r.bits_per_weight,
                  r.block, r.rejected.c_str());
  }
}

void run_error(const ErrorArgs& a) {
  std::vector<std::string> names = split_commas(a.formats);
  if (names.empty())
    for (const auto& f : all_formats()) names.emplace_back(f.name);
  for (const auto& n : names) find_format(n);  // fail on a typo before loading any data
  LabData data = load_lab_data(a.dist, a.rows, a.cols, a.seed);
  auto results = measure_formats(data.samples, names, {}, /*show_progress=*/true);
  if (a.json)
    std::printf("%s\n", results_json(data, results).dump(2).c_str());
  else
    print_results(data, results);
}

void setup_formats(CLI::App& app) {
  auto* formats = app.add_subcommand("formats", "Number formats: list, error lab, RaZeR tools");
  formats->require_subcommand(1);

  formats->add_subcommand("list", "List every registered format")->callback(print_list);

  auto args = std::make_shared<ErrorArgs>();
  auto* error = formats->add_subcommand(
      "error", "Relative MSE and SQNR of each format on the same data");
  error->add_option("--dist", args->dist,
                    "gaussian | laplace | student-t:NU | FILE.safetensors[:TENSOR] | DIR[:TENSOR]")
      ->capture_default_str();
  error->add_option("--rows", args->rows, "rows of generated data")->capture_default_str();
  error->add_option("--cols", args->cols, "cols of generated data")->capture_default_str();
  error->add_option("--formats", args->formats, "comma-separated formats (default: all)");
  error->add_option("--seed", args->seed, "seed for generated data (default: fresh)");
  error->add_flag("--json", args->json, "print JSON");
  error->callback([args] { run_error(*args); });

  add_sweep_command(*formats);
  add_quantize_commands(*formats);
  add_hardware_commands(*formats);
}

}  // namespace
}  // namespace nibble::cli::formats

NIBBLE_COMMAND(nibble::cli::formats::setup_formats);

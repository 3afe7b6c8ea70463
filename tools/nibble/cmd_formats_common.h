#pragma once
// Pieces shared by the `nibble formats ...` subcommands (cmd_formats*.cpp).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nibble/error_stats.h"
#include "nibble/safetensors.h"

namespace nibble::cli::formats {

// The data a measurement runs on, and how to describe it in a report.
struct LabData {
  std::string description;           // "gaussian 1024 x 4096 (seed 123)", "FILE: 7 tensors"
  std::optional<uint64_t> seed;      // set for generated data
  std::vector<ErrorSample> samples;
};

// --dist: a distribution name (gaussian, laplace, student-t:NU), or FILE.safetensors[:TENSOR], or a
// model directory[:TENSOR]. Generated data is rows x cols from `seed` (a fresh seed if unset).
LabData load_lab_data(const std::string& dist, int64_t rows, int64_t cols,
                      std::optional<uint64_t> seed);

// "A,B" -> {A, B}; throws nibble::Error naming the option.
std::pair<float, float> parse_sv_pair(const std::string& text, const std::string& option);

std::vector<std::string> split_commas(const std::string& text);

bool is_float_dtype(DType t);

// Installs the subcommands defined in the other cmd_formats_*.cpp files.
void add_quantize_commands(CLI::App& formats);  // quantize, dequantize
void add_hardware_commands(CLI::App& formats);  // decoder-table, two-pass
void add_sweep_command(CLI::App& formats);      // sweep-sv

}  // namespace nibble::cli::formats

#pragma once
// The quantization-error laboratory: error statistics (relative MSE, SQNR), random test data from
// heavy- and light-tailed distributions, and format-error measurements on one data set
// (`nibble formats error` / `sweep-sv` are thin wrappers around these).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/format.h"

namespace nibble {

// ---- statistics (float64 accumulation) ------------------------------------------------------

struct ErrorStats {
  double sum_sq_err = 0;  // sum (x - x^)^2
  double sum_sq_ref = 0;  // sum x^2
  int64_t count = 0;

  // ||x - x^||^2 / ||x||^2; 0 when both are 0, +inf when only the reference is 0.
  double rel_mse() const;
  // 10 log10(||x||^2 / ||x - x^||^2); +inf for an exact reconstruction.
  double sqnr_db() const;
  void add(const float* ref, const float* approx, int64_t n);
  void merge(const ErrorStats& other);
};

ErrorStats error_stats(const float* ref, const float* approx, int64_t n);

// ---- random data ------------------------------------------------------------------------------

struct Distribution {
  enum class Kind { Gaussian, Laplace, StudentT } kind = Kind::Gaussian;
  double nu = 0;  // degrees of freedom (StudentT only)

  std::string name() const;  // "gaussian", "laplace", "student-t:4"
};

// Parses "gaussian", "laplace", "student-t:NU" (NU > 0); nullopt for anything else (a file name).
// Throws nibble::Error for a malformed student-t spec.
std::optional<Distribution> parse_distribution(std::string_view spec);

// n samples of the standard distribution (unit scale, zero location), reproducible from the seed.
std::vector<float> random_values(const Distribution& dist, int64_t n, uint64_t seed);

// A seed from std::random_device (used unless the user asks for one).
uint64_t fresh_seed();

// ---- format error on one data set -------------------------------------------------------------

// A 2-D matrix to measure on, with a name for reports and error messages.
struct ErrorSample {
  std::string name;
  int64_t rows = 0, cols = 0;
  std::vector<float> values;
};

struct FormatError {
  std::string format;
  double bits_per_weight = 0;
  int block = 0;
  ErrorStats stats;        // pooled over every sample
  std::string rejected;    // non-empty: the format refused the data, and why
};

// Quantizes and dequantizes every sample with each format; a format that throws nibble::Error is
// reported with the reason instead of stats. Results come sorted by relative MSE (rejected last).
std::vector<FormatError> measure_formats(const std::vector<ErrorSample>& samples,
                                         const std::vector<std::string>& formats,
                                         const QuantOptions& opt = {}, bool show_progress = false);

// Error of one format (with options) pooled over the samples; throws what the format throws.
ErrorStats format_error(const std::vector<ErrorSample>& samples, std::string_view format,
                        const QuantOptions& opt = {});

// ---- special-value sweep (paper 000, Fig. 3) --------------------------------------------------

struct SvSweepPoint {
  float sv = 0;          // magnitude swept
  double rel_mse = 0;
  double normalized = 0; // rel_mse / rel_mse of plain NVFP4 on the same data
};

struct SvSweep {
  double nvfp4_rel_mse = 0;
  std::vector<SvSweepPoint> single;     // nvfp4-razer with the one pair ±sv (sv_a = sv_b = sv)
  std::vector<SvSweepPoint> with_five;  // nvfp4-razer with {±5, ±sv}
};

// The allowed special-value magnitudes: 2.5, 3.0, ..., 9.5 (the offset-register range).
std::vector<float> special_value_grid();

SvSweep sweep_special_values(const std::vector<ErrorSample>& samples, bool show_progress = false);

}  // namespace nibble

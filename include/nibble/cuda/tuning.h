#pragma once
// The GEMV tuning table: per (format, K, N, M) the launch choice measured fastest by
// `nibble tune` on the current GPU. linear() consults it; without an entry it uses the built-in
// heuristic. The table is JSON: [{"format", "K", "N", "M", "engine", "rows_per_warp", "fp4_decode",
// "k_splits", "row_blocks"}, ...] with engine "cuda_cores", "tensor_cores" or "tensor_stream";
// k_splits (1, 2, 4, 8) and row_blocks (1, 2, 4) may be absent (then 1 and the heuristic's).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/cuda/linear.h"

namespace nibble::cuda {

struct TunedChoice {
  int rows_per_warp = 2;
  Fp4Decode fp4_decode = Fp4Decode::bits;
  Engine engine = Engine::cuda_cores;
  int k_splits = 1;  // parts of K (see LinearOptions::k_splits)
  int row_blocks = 1;  // tensor cores and stream: 16-row blocks per CTA (see LinearOptions::row_blocks)
};

// True for the k_splits values the CUDA-core kernel supports: 1, 2, 4, 8.
constexpr bool valid_k_splits(int k) { return k == 1 || k == 2 || k == 4 || k == 8; }
// The tensor-core kernel's launch shapes: 1, 2 or 4 row blocks per CTA.
constexpr bool valid_row_blocks(int r) { return r == 1 || r == 2 || r == 4; }

struct TuningEntry {
  std::string format;
  int64_t K = 0, N = 0;
  int M = 0;
  TunedChoice choice;
};

// The table's entry for this case, else the heuristic (exact M match; else the heuristic).
TunedChoice tuned_choice(std::string_view format, int64_t K, int64_t N, int M);
// The heuristic alone: tensor cores for M >= 2 where there is a tile layout (and at one row for
// nf4 and int4-g128's long rows; never the stream kernel: docs/kernels.md), one row block up to 4
// tokens and two after (at 9-16 tokens: the count that fills more of the SMs' CTA slots, see
// tuning.cpp); on CUDA cores 2 rows per warp and the fewest K splits that launch ~2 CTAs per SM
// and leave each split at most 8192 elements of a row, never a split shorter than one full step
// (2048 elements).
TunedChoice default_choice(std::string_view format, int64_t K, int64_t N, int M);
// The SM count the heuristic plans for: the current device's, or 132 (an H100 SXM) without one.
int heuristic_sm_count();
// The heuristic's K splits for one engine and launch shape: CUDA cores, see above; tensor cores,
// CTAs per cluster (1, 2, 4) doubled while the grid still fits the SMs at once and each CTA keeps
// at least 2048 elements of a row; the stream kernel, 1.
int default_k_splits(Engine engine, std::string_view format, int64_t K, int64_t N, int M, int row_blocks);

// Replaces the table in use (thread-safe). load_tuning_table throws nibble::Error naming the file
// and field on a bad file. The env variable NIBBLE_CUDA_TUNING, if set, names a table loaded on
// first use.
void set_tuning_table(std::vector<TuningEntry> entries);
void load_tuning_table(const std::string& path);
void save_tuning_table(const std::string& path, const std::vector<TuningEntry>& entries);

std::string_view fp4_decode_name(Fp4Decode d);
std::string_view engine_name(Engine e);

}  // namespace nibble::cuda

#pragma once
// Where a linear layer changes kernels as its row count M grows (paper 002 App. C.3): the GEMV
// (linear.h) up to gemm_from_m - 1 rows, the fused tensor-core GEMM (gemm.h) from gemm_from_m,
// and from dequant_from_m the weight dequantized to fp16 once and cuBLAS. `nibble tune
// --crossover FILE` measures them per (format, K, N) on the current GPU; the runtime reads that
// table (env NIBBLE_CUDA_CROSSOVER, or set_crossover_table) and falls back to the defaults, which
// are the values measured on the H100 (docs/gemm.md).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::cuda {

// The path for M rows: dequant + cuBLAS when M >= dequant_from_m, else the fused GEMM when
// M >= gemm_from_m, else the GEMV (in chunks of 16 rows above 16).
struct Crossover {
  int gemm_from_m = 17;      // the GEMV's own limit is 16 rows
  // H100, 2026-11-27, with the register-A wgmma GEMM (docs/perf/gemm-2026-11-27.md): dequant +
  // cuBLAS is faster from 1024 rows on the q/k/v shapes of razer-fp4-g128, int4-g128 and nf4, from
  // 2048 on most others, never for nvfp4 (up to 2048 measured). (513 before: the smem-B kernel.)
  int dequant_from_m = 1025;
};

struct CrossoverEntry {
  std::string format;
  int64_t K = 0, N = 0;
  Crossover c;
};

// The table's entry for (format, K, N), else the defaults (nestedfp*: never dequantized).
Crossover crossover_for(std::string_view format, int64_t K, int64_t N);

// Replace / read / write the table (JSON: [{"format", "K", "N", "gemm_from_m", "dequant_from_m"}]).
// load throws nibble::Error naming the file and field on a bad file.
void set_crossover_table(std::vector<CrossoverEntry> entries);
void load_crossover_table(const std::string& path);
void save_crossover_table(const std::string& path, const std::vector<CrossoverEntry>& entries);

// Measures the crossovers of `format` [N, K] on this GPU with random weights: GEMV (in chunks of
// 16 rows) vs the fused GEMM at M = 32 .. 256, and the fused GEMM vs dequant + cuBLAS at M = 64 ..
// 2048; each switch is placed just past the last M where the smaller-M path still won. The
// format needs both a GEMV and a GEMM kernel.
CrossoverEntry measure_crossover(std::string_view format, int64_t K, int64_t N, cudaStream_t stream);

}  // namespace nibble::cuda

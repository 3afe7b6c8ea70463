// `nibble tune`: sweeps the GEMV launch choices (CUDA cores vs tensor cores; on CUDA cores rows per
// warp and the number of K splits, i.e. CTAs per SM) per (format, K, N, M) on the current GPU and writes the table that linear() reads (load it with
// NIBBLE_CUDA_TUNING=FILE or `nibble bench kernels --tuning FILE`). With --crossover FILE it
// instead measures, per (format, K, N), where the runtime should switch from the GEMV to the fused
// GEMM and to dequant + cuBLAS (nibble/cuda/crossover.h; load with NIBBLE_CUDA_CROSSOVER=FILE).
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "nibble/error.h"

#ifdef NIBBLE_HAVE_CUDA
#include <fmt/format.h>

#include "nibble/cuda/bench.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/crossover.h"
#include "nibble/cuda/gemm.h"
#include "nibble/cuda/linear.h"
#include "nibble/cuda/tuning.h"

namespace {

using namespace nibble;
using namespace nibble::cuda;

struct TuneOptions {
  std::string out = "tuning.json", crossover;
  std::vector<std::string> formats;
  std::vector<std::string> shapes{"4096x6144", "4096x4096", "4096x28672", "14336x4096",
                                  "5120x10240", "8192x5120", "5120x51200", "25600x5120"};
  std::vector<int> ms{1, 2, 4, 8, 16};
};

std::pair<int64_t, int64_t> parse_shape(const std::string& s) {
  const auto kn = cli::parse_kxn(s);
  if (!kn) throw Error(fmt::format("tune: --shapes: '{}' is not KxN", s));
  return *kn;
}

// Candidates per (format, shape, M). CUDA cores: rows per warp x K splits (paper 000 App. E's
// SM-count tuning: the splits set how many CTAs share the SMs), bit decoder; the shared-memory
// FP4 table never won a sweep (docs/kernels.md) and is left to `nibble bench kernels`. Tensor
// cores: row blocks per CTA (not the stream kernel: it wins alone and loses inside a model,
// docs/kernels.md, so a table must not pick it from isolated timings) x K splits (CTAs per
// cluster, sm_90). From M = 2 on, where the
// tensor cores win, only the heuristic's CUDA-core shape is timed against them.
std::vector<TunedChoice> candidates_for(const std::string& f, int64_t K, int64_t N, int M, bool has_tc) {
  std::vector<TunedChoice> out;
  if (has_tc)
    for (int rb : {1, 2, 4})
      for (int ks : {1, 2, 4})
        if (ks == 1 || (tensor_core_splits_supported() && K >= 2048 * ks)) {
          TunedChoice c;
          c.engine = Engine::tensor_cores, c.row_blocks = rb, c.k_splits = ks;
          out.push_back(c);
        }
  if (M >= 2 && has_tc) {
    TunedChoice h = default_choice(f, K, N, M);
    h.engine = Engine::cuda_cores;
    out.push_back(h);
    return out;
  }
  for (int rpw : {2, 4})
    for (int ks : {1, 2, 4, 8})
      if (ks == 1 || K >= 2048 * ks) out.push_back({rpw, Fp4Decode::bits, Engine::cuda_cores, ks});
  return out;
}

double ctas_per_sm(const TunedChoice& c, int64_t N, int M, int sms) {
  if (c.engine != Engine::cuda_cores)
    return double((N + 16 * c.row_blocks - 1) / (16 * c.row_blocks) * c.k_splits) / sms;
  const int rows = c.rows_per_warp == 4 && M <= 8 ? 4 : 2;
  const int64_t per_cta = 8 / c.k_splits * rows;
  return double((N + per_cta - 1) / per_cta) / sms;
}

void run_crossover(const TuneOptions& o) {
  std::vector<std::string> formats = o.formats;
  if (formats.empty())
    for (const auto& f : kernel_formats())
      if (has_gemm_kernel(f)) formats.push_back(f);
  cudaStream_t stream;
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<CrossoverEntry> table;
  for (const std::string& shape : o.shapes) {
    const auto [K, N] = parse_shape(shape);
    for (const std::string& f : formats) {
      table.push_back(measure_crossover(f, K, N, stream));
      const Crossover& c = table.back().c;
      std::printf("%-16s K=%-6lld N=%-6lld fused GEMM from M=%d, dequant+cuBLAS from M=%d\n", f.c_str(),
                  (long long)K, (long long)N, c.gemm_from_m, c.dequant_from_m);
      std::fflush(stdout);
    }
  }
  NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));
  save_crossover_table(o.crossover, table);
  std::printf("wrote %zu entries to %s\n", table.size(), o.crossover.c_str());
}

void run_tune(const TuneOptions& o) {
  if (!o.crossover.empty()) return run_crossover(o);
  const int sms = device_info().sm_count;
  std::vector<std::string> formats = o.formats;
  if (formats.empty())
    for (const auto& f : kernel_formats())
      if (f != "nvfp4-4over6") formats.push_back(f);
  cudaStream_t stream;
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<TuningEntry> table;
  for (const std::string& shape : o.shapes) {
    const auto [K, N] = parse_shape(shape);
    uint16_t *x = nullptr, *y = nullptr;
    NIBBLE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&x), size_t(16) * K * 2));
    NIBBLE_CUDA_CHECK(cudaMemset(x, 0x3C, size_t(16) * K * 2));  // 1.0078 in every element: finite, nonzero
    NIBBLE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&y), size_t(16) * N * 2));
    for (const std::string& f : formats) {
      const PackedTensor t = random_packed(f, N, K, 99);
      std::vector<DeviceWeight> copies;
      copies.push_back(upload(t, f));
      while (int(copies.size()) < rotation_copies(copies[0].bytes())) copies.push_back(upload(t, f));
      for (int M : o.ms) {
        std::vector<TunedChoice> candidates = candidates_for(f, K, N, M, copies[0].qweight_mma != nullptr);
        TuningEntry best{f, K, N, M, {}};
        double best_us = 1e30;
        for (const TunedChoice& cand : candidates) {
          LinearOptions opt;
          opt.fp4_decode = cand.fp4_decode;
          opt.rows_per_warp = cand.rows_per_warp;
          opt.engine = cand.engine;
          opt.k_splits = cand.k_splits;
          opt.row_blocks = cand.row_blocks;
          const double us = time_rotated_us(
              [&](int c, cudaStream_t st) { linear(x, M, copies[size_t(c)], y, st, opt); }, int(copies.size()),
              stream, 32, 7);
          const std::string shape_name =
              cand.engine != Engine::cuda_cores
                  ? fmt::format("row_blocks {} k_splits {}", cand.row_blocks, cand.k_splits)
                  : fmt::format("{} rows/warp {} k_splits {}", fp4_decode_name(cand.fp4_decode), cand.rows_per_warp,
                                cand.k_splits);
          std::printf("%-16s K=%-6lld N=%-6lld M=%-2d %-12s %-32s (%5.1f CTAs/SM): %8.2f us\n", f.c_str(),
                      (long long)K, (long long)N, M, std::string(engine_name(cand.engine)).c_str(),
                      shape_name.c_str(), ctas_per_sm(cand, N, M, sms), us);
          if (us < best_us) best_us = us, best.choice = cand;
        }
        table.push_back(best);
      }
    }
    cudaFree(x);
    cudaFree(y);
  }
  NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));
  save_tuning_table(o.out, table);
  std::printf("wrote %zu entries to %s\n", table.size(), o.out.c_str());
}

}  // namespace

static void setup_tune(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  auto* cmd = app.add_subcommand("tune", "Sweep the CUDA GEMV launch choices on this GPU and write a tuning table");
  cmd->add_option("--out", o->out, "table file to write (JSON)");
  cmd->add_option("--formats", o->formats, "formats (default: every format with a kernel)")->delimiter(',');
  cmd->add_option("--shapes", o->shapes, "KxN shapes (default: Llama-3.1-8B and Qwen3-32B projections)")->delimiter(',');
  cmd->add_option("--m", o->ms, "activation rows M (default 1,2,4,8,16)")->delimiter(',');
  cmd->add_option("--crossover", o->crossover,
                  "instead: measure the GEMV / GEMM / dequant+cuBLAS crossovers into this JSON file");
  cmd->callback([o] { run_tune(*o); });
}
NIBBLE_COMMAND(setup_tune);

#else  // built without CUDA: the command exists and says so

static void setup_tune(CLI::App& app) {
  nibble::cli::add_cuda_only_command(&app, "tune", "tune", "Sweep the CUDA GEMV launch choices",
                                     {"--out", "--formats", "--shapes", "--m", "--crossover"});
}
NIBBLE_COMMAND(setup_tune);

#endif

// `nibble bench chain`: the cost of a kernel boundary inside a CUDA graph on this GPU. Chains of
// dependent kernels that only stream bytes (the sizes of a decode step's projections), with and
// without programmatic dependent launch, against one kernel reading the same bytes: what a step
// built of one kernel per op pays for its boundaries whatever its kernels do.
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"

#ifdef NIBBLE_HAVE_CUDA
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "nibble/cuda/bench.h"
#include "nibble/cuda/check.h"
#include "nibble/error.h"

namespace {

using namespace nibble;
using namespace nibble::cuda;

struct Options {
  // MB per kernel: none, and int4-g128's Llama-3.1-8B projections (o, q/k/v, down, gate/up)
  std::vector<double> sizes_mb{0, 8.9, 13.4, 31, 62};
  int kernels = 64;
  size_t max_bytes = size_t(4) << 30;  // of one chain: its regions must not fit the L2
  std::string json, md;
};

void run_bench(const Options& o) {
  if (o.kernels < 2) throw Error("bench chain: --kernels must be at least 2");
  const DeviceInfo dev = device_info();
  cudaStream_t stream;
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double copy_gbps = copy_bandwidth_gbps(size_t(1) << 30, stream);
  std::string md = fmt::format(
      "# Kernel boundaries in a graph, {}\n\nDevice: {} ({} SMs), copy bandwidth {:.0f} GB/s (read + write, same "
      "run). Each row: a CUDA graph of dependent kernels that each read their own region (16-byte streaming loads, "
      "{} CTAs per SM, the first loads requested before `griddepcontrol.wait`), regions in a buffer larger than the "
      "L2. us per kernel with programmatic dependent launch (PDL) and without; one kernel: the same bytes in one "
      "launch, per kernel's share; boundary: PDL chain minus one kernel, the cost of each boundary. Command: `nibble "
      "bench chain`.\n\n| MB per kernel | kernels | PDL us | no PDL us | one kernel us | boundary us | PDL GB/s | "
      "one kernel GB/s | copy floor us |\n|---|---|---|---|---|---|---|---|---|\n",
      today(), dev.name, dev.sm_count, copy_gbps, kChainCtasPerSm);
  nlohmann::json rows = nlohmann::json::array();
  for (double mb : o.sizes_mb) {
    if (mb < 0) throw Error(fmt::format("bench chain: --sizes: {} MB is negative", mb));
    const size_t bytes = size_t(mb * 1e6) / 16 * 16;
    const int n = bytes == 0 ? o.kernels : int(std::clamp<size_t>(o.max_bytes / bytes, 2, size_t(o.kernels)));
    std::fprintf(stderr, "bench chain: %.1f MB x %d kernels\n", mb, n);
    const ChainTiming t = time_stream_chain(bytes, n, stream);
    const double floor_us = bytes / (copy_gbps * 1e3);
    auto gbps = [&](double us) { return us > 0 ? bytes / (us * 1e3) : 0.0; };
    md += fmt::format("| {:.1f} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.0f} | {:.0f} | {:.2f} |\n", mb, n,
                      t.pdl_us, t.plain_us, t.one_kernel_us, t.pdl_us - t.one_kernel_us, gbps(t.pdl_us),
                      gbps(t.one_kernel_us), floor_us);
    rows.push_back({{"bytes_per_kernel", bytes}, {"kernels", n}, {"pdl_us", t.pdl_us}, {"plain_us", t.plain_us},
                    {"one_kernel_us", t.one_kernel_us}, {"copy_floor_us", floor_us}, {"copy_gbps", copy_gbps},
                    {"device", dev.name}, {"date", today()}});
  }
  NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));
  std::fputs(md.c_str(), stdout);
  cli::save_text(o.json, rows.dump(1) + "\n", "bench chain --json");
  cli::save_text(o.md, md, "bench chain --md");
}

}  // namespace

static void setup_bench_chain(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* cmd = nibble::cli::bench_group(app)->add_subcommand(
      "chain", "Time kernel boundaries: graphs of dependent streaming kernels against one kernel (needs a GPU)");
  cmd->add_option("--sizes", opt->sizes_mb, "MB each kernel reads (default 0,8.9,13.4,31,62)")->delimiter(',');
  cmd->add_option("--kernels", opt->kernels, "kernels per chain, at most (default 64)");
  cmd->add_option("--json", opt->json, "write the rows as JSON");
  cmd->add_option("--md", opt->md, "write the Markdown table");
  cmd->callback([opt] { run_bench(*opt); });
}
NIBBLE_COMMAND(setup_bench_chain);

#else  // built without CUDA: the command exists and says so

static void setup_bench_chain(CLI::App& app) {
  nibble::cli::add_cuda_only_command(nibble::cli::bench_group(app), "chain", "bench chain",
                                     "Time kernel boundaries in a CUDA graph", {"--sizes", "--kernels", "--json", "--md"});
}
NIBBLE_COMMAND(setup_bench_chain);

#endif

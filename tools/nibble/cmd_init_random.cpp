// `nibble init-random`: a model directory with the exact shapes of a published architecture and
// RANDOM weights (for speed measurements where the real weights are not at hand).
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.h"
#include "nibble/init_random.h"

namespace {

struct Options {
  std::string arch, out, dtype = "bf16";
  uint64_t seed = 0;
  int layers = 0;
};

void run(const Options& o) {
  nibble::InitRandomOptions opt;
  opt.seed = o.seed;
  opt.dtype = nibble::random_weight_dtype(o.dtype);
  opt.layers = o.layers;
  opt.progress = true;
  nibble::random_arch_config(o.arch);  // rejects an unknown --arch before anything is printed
  std::printf("init-random: %s -> %s: the weights are RANDOM (seed %llu), not a trained model\n", o.arch.c_str(),
              o.out.c_str(), static_cast<unsigned long long>(o.seed));
  std::printf("init-random: tokenizer is a stand-in (SmolLM2, 49152 entries), not the model's own\n");
  std::fflush(stdout);
  const nibble::InitRandomSummary s = nibble::init_random(o.arch, o.out, opt);
  std::printf("init-random: wrote %d tensors, %.3f B parameters, %.2f GB in %d shard(s) in %.1f s (%.2f GB/s)\n",
              s.tensors, s.parameters / 1e9, s.bytes / 1e9, s.shards, s.seconds, s.bytes / 1e9 / s.seconds);
}

}  // namespace

static void setup_init_random(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("init-random", "Write a model with a published architecture and RANDOM weights");
  cmd->add_option("--arch", o->arch, fmt::format("architecture: {}", fmt::join(nibble::random_archs(), ", ")))
      ->required();
  cmd->add_option("-o,--out", o->out, "output directory (created; must be empty)")->required();
  cmd->add_option("--seed", o->seed, "random seed (same seed, same bytes)");
  cmd->add_option("--dtype", o->dtype, "weight dtype: bf16 (default), fp16 or fp32");
  cmd->add_option("--layers", o->layers, "override the number of layers (a shallower model of the same width)")
      ->check(CLI::Range(1, 1000));
  cmd->callback([o] { run(*o); });
}
NIBBLE_COMMAND(setup_init_random);

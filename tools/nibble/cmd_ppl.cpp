// nibble ppl: perplexity by the protocol of ../shared/data/README.md.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cmd_model_options.h"
#include "command.h"
#include "nibble/paths.h"
#include "nibble/perplexity.h"

namespace {

struct PplFlags {
  nibble::cli::ModelFlags model;
  std::string text, device = "cpu";
  int ctx = 0, max_windows = 0;
  bool json = false;
};

void run_ppl(const PplFlags& f) {
  nibble::cli::require_device(f.device);
  const std::filesystem::path text =
      f.text.empty() ? nibble::data_dir() / "text/wikitext-2-raw/wiki.test.gptq_join.txt" : std::filesystem::path(f.text);
  const auto m = nibble::Model::load(f.model.model, nibble::cli::load_options(f.model));
  nibble::PerplexityOptions opt;
  opt.ctx = f.ctx;
  opt.max_windows = f.max_windows;
  nibble::cli::DeviceRuntime rt;
  opt.make_sequence = nibble::cli::sequence_factory(f.device, *m, rt);
  const nibble::PerplexityResult r = nibble::perplexity_of_file(*m, text, opt);
  if (f.json) {
    nlohmann::json j = {{"model", f.model.model},
                        {"text", text.string()},
                        {"format", f.model.format.empty() ? "as stored" : f.model.format},
                        {"act_format", f.model.act_format.empty() ? "fp32" : f.model.act_format},
                        {"kv_cache", f.model.kv_cache.empty() ? (f.device == "cuda" ? "fp16" : "fp32") : f.model.kv_cache},
                        {"device", f.device},
                        {"ctx", r.ctx},
                        {"windows", r.windows},
                        {"total_tokens", r.total_tokens},
                        {"scored_tokens", r.scored_tokens},
                        {"nll_sum", r.nll_sum},
                        {"ppl", r.ppl},
                        {"seconds", r.seconds},
                        {"tokens_per_second", r.tokens_per_second},
                        {"weight_bytes", m->weight_bytes()},
                        {"weight_rel_mse", m->weight_rel_mse()}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%s: %lld tokens, %d windows of %d (%lld scored)\n", text.filename().c_str(),
              (long long)r.total_tokens, r.windows, r.ctx, (long long)r.scored_tokens);
  std::printf("ppl %.4f\n", r.ppl);
  std::printf("%.1f tokens/s (%.1f s, %s)\n", r.tokens_per_second, r.seconds, f.device.c_str());
}

void setup_ppl(CLI::App& app) {
  auto f = std::make_shared<PplFlags>();
  auto* cmd = app.add_subcommand("ppl", "Perplexity of a model on a text (WikiText-2 by default)");
  cmd->add_option("-m,--model", f->model.model, "HF model directory or llama2.c .bin")->required();
  nibble::cli::add_quant_flags(cmd, f->model);
  nibble::cli::add_kv_flag(cmd, f->model.kv_cache);
  nibble::cli::add_device_flag(cmd, f->device);
  cmd->add_option("--ctx", f->ctx, "window length (default: 2048, or half the model's maximum)");
  cmd->add_option("--text", f->text, "text file (default: wiki.test.gptq_join.txt)");
  cmd->add_option("--max-windows", f->max_windows, "evaluate only the first N windows");
  cmd->add_flag("--json", f->json, "print JSON");
  cmd->callback([f] { run_ppl(*f); });
}

}  // namespace

NIBBLE_COMMAND(setup_ppl);

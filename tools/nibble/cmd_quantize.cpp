// nibble quantize: writes a nibble-quantized Hugging Face directory (FORMATS.md "Serialized
// quantized models") that `nibble ppl / generate -m OUT_DIR` load back.
#include <cstdio>

#include "cmd_model_options.h"
#include "command.h"

namespace {

struct QuantizeFlags {
  nibble::cli::ModelFlags model;
  std::string out;
};

void run_quantize(const QuantizeFlags& f) {
  const nibble::LoadOptions o = nibble::cli::load_options(f.model);
  const auto m = nibble::Model::load(f.model.model, o);
  m->save_quantized(f.out);
  std::printf("wrote %s: %s weights, %.2f MB, weight relative MSE %.4e\n", f.out.c_str(),
              f.model.format.c_str(), double(m->weight_bytes()) / 1e6, m->weight_rel_mse());
  for (const std::string& name : m->ineligible_layers())
    std::printf("  kept unquantized (not NestedFP-eligible): %s\n", name.c_str());
}

void setup_quantize(CLI::App& app) {
  auto f = std::make_shared<QuantizeFlags>();
  auto* cmd = app.add_subcommand("quantize", "Quantize a model's linear layers and save it");
  cmd->add_option("-m,--model", f->model.model, "HF model directory or llama2.c .bin")->required();
  nibble::cli::add_quant_flags(cmd, f->model);
  cmd->get_option("--format")->required();
  cmd->add_option("-o,--output", f->out, "output directory")->required();
  cmd->callback([f] { run_quantize(*f); });
}

}  // namespace

NIBBLE_COMMAND(setup_quantize);

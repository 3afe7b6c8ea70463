#pragma once
// CLI flags shared by the commands that load a model (ppl, quantize, compare): weight format,
// its block / special values, activation format.
#include <CLI/CLI.hpp>

#include <string>

#include "nibble/error.h"
#include "nibble/model.h"

namespace nibble::cli {

struct ModelFlags {
  std::string model, format, act_format, sv;
  int block = 0;
};

inline void add_quant_flags(CLI::App* cmd, ModelFlags& f) {
  cmd->add_option("-f,--format", f.format, "quantize the weights on load to this format");
  cmd->add_option("--act-format", f.act_format,
                  "quantize per token the input of each quantized linear (of every decoder linear without -f), e.g. nvfp4-razer-act");
  cmd->add_option("--block", f.block, "block / group size (default: the format's)");
  cmd->add_option("--sv", f.sv, "RaZeR special-value pair A,B (e.g. 5,8)");
}

// "A,B" -> sv pair; throws nibble::Error naming the flag on malformed input.
inline void parse_sv(const std::string& s, QuantOptions& q) {
  if (s.empty()) return;
  const size_t comma = s.find(',');
  try {
    if (comma == std::string::npos) throw std::invalid_argument("no comma");
    size_t used_a = 0, used_b = 0;
    q.sv_a = std::stof(s.substr(0, comma), &used_a);
    q.sv_b = std::stof(s.substr(comma + 1), &used_b);
    if (used_a != comma || used_b != s.size() - comma - 1) throw std::invalid_argument("junk");
  } catch (const std::exception&) {
    throw Error("--sv: expected two numbers A,B (e.g. 5,8), got \"" + s + "\"");
  }
}

inline LoadOptions load_options(const ModelFlags& f) {
  LoadOptions o;
  o.weight_format = f.format;
  o.act_format = f.act_format;
  o.quant.block = f.block;
  parse_sv(f.sv, o.quant);
  o.progress = true;
  return o;
}

}  // namespace nibble::cli

// `nibble formats quantize` / `dequantize`: the 2-D float tensors of a safetensors file to the
// serialized packed layout of FORMATS.md (via packed_io) and back to F32.
#include <cstdio>
#include <set>

#include <fmt/format.h>

#include "cmd_formats_common.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/packed_io.h"
#include "nibble/progress.h"

namespace nibble::cli::formats {
namespace {

struct QuantizeArgs {
  std::string format, sv, in, out;
  int block = 0;
};

void copy_tensor(SafetensorsWriter& w, const TensorView& t) {
  w.add(t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes));
}

int64_t float_matrix_elements(const SafetensorsFile& f) {
  int64_t n = 0;
  for (const auto& [name, t] : f.tensors())
    if (t.shape.size() == 2 && is_float_dtype(t.dtype)) n += t.numel();
  return n;
}

void run_quantize(const QuantizeArgs& a) {
  const FormatInfo& info = find_format(a.format);
  QuantOptions opt;
  opt.block = a.block;
  if (!a.sv.empty()) std::tie(opt.sv_a, opt.sv_b) = parse_sv_pair(a.sv, "--sv");
  auto in = SafetensorsFile::open(a.in);
  SafetensorsWriter w;
  for (const auto& [k, v] : in->metadata()) w.set_metadata(k, v);
  Progress bar("quantize", float_matrix_elements(*in));
  int quantized = 0;
  for (const auto& [name, t] : in->tensors()) {
    if (t.shape.size() != 2 || !is_float_dtype(t.dtype)) {
      copy_tensor(w, t);
      continue;
    }
    const std::vector<float> x = t.to_float();
    opt.name = name;
    const PackedTensor p = info.quantize(x.data(), t.shape[0], t.shape[1], opt);
    const std::vector<float> back = dequantize(p);
    const ErrorStats e = error_stats(x.data(), back.data(), int64_t(x.size()));
    write_packed(w, name, p, info);
    bar.add(t.numel());
    ++quantized;
    std::fprintf(stderr, "%s [%lld x %lld] -> %s: rel MSE %.4e, SQNR %.2f dB\n", name.c_str(),
                 (long long)t.shape[0], (long long)t.shape[1], a.format.c_str(), e.rel_mse(),
                 e.sqnr_db());
  }
  bar.finish();
  if (quantized == 0) throw Error(a.in + ": no 2-D float tensors to quantize");
  w.write(a.out);
  std::printf("%s: %d tensors quantized to %s\n", a.out.c_str(), quantized, a.format.c_str());
}

// Names of the tensors and metadata keys that make up packed tensor `base`.
void mark_parts(const std::string& base, const FormatInfo& info, std::set<std::string>& tensors,
                std::set<std::string>& keys) {
  for (const char* s : {".qweight", ".scales", ".global_scale", ".sv_pair"}) tensors.insert(base + s);
  if (!info.aux_name.empty()) tensors.insert(base + "." + std::string(info.aux_name));
  for (const char* k : {".format", ".block", ".rows", ".cols"}) keys.insert(base + k);
}

void run_dequantize(const std::string& in_path, const std::string& out_path) {
  auto in = SafetensorsFile::open(in_path);
  const std::string suffix = ".qweight";
  std::vector<std::string> bases;
  for (const auto& [name, t] : in->tensors())
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      std::string base = name.substr(0, name.size() - suffix.size());
      if (has_packed(*in, base)) bases.push_back(base);
    }
  if (bases.empty()) throw Error(in_path + ": no packed tensors (NAME.qweight) to dequantize");
  SafetensorsWriter w;
  std::set<std::string> consumed, consumed_keys;
  Progress bar("dequantize", int64_t(bases.size()));
  for (const auto& base : bases) {
    const PackedTensor p = read_packed(*in, base);
    mark_parts(base, find_format(p.format), consumed, consumed_keys);
    const std::vector<float> x = dequantize(p);
    w.add_f32(base, {p.rows, p.cols}, x.data());
    bar.add();
  }
  bar.finish();
  for (const auto& [name, t] : in->tensors())
    if (!consumed.count(name)) copy_tensor(w, t);
  for (const auto& [k, v] : in->metadata())
    if (!consumed_keys.count(k)) w.set_metadata(k, v);
  w.write(out_path);
  std::printf("%s: %zu tensors dequantized to F32\n", out_path.c_str(), bases.size());
}

}  // namespace

void add_quantize_commands(CLI::App& formats) {
  auto q = std::make_shared<QuantizeArgs>();
  auto* quant = formats.add_subcommand(
      "quantize", "Quantize the 2-D float tensors of a safetensors file (other tensors copied)");
  quant->add_option("--format", q->format, "format name (see `nibble formats list`)")->required();
  quant->add_option("--sv", q->sv, "RaZeR special-value pair A,B (default: the format's)");
  quant->add_option("--block", q->block, "block / group size (default: the format's)");
  quant->add_option("in", q->in, "input .safetensors")->required();
  quant->add_option("out", q->out, "output .safetensors")->required();
  quant->callback([q] { run_quantize(*q); });

  auto files = std::make_shared<std::pair<std::string, std::string>>();
  auto* deq = formats.add_subcommand(
      "dequantize", "Decode every packed tensor of a safetensors file to F32 (others copied)");
  deq->add_option("in", files->first, "input .safetensors (written by `formats quantize`)")
      ->required();
  deq->add_option("out", files->second, "output .safetensors")->required();
  deq->callback([files] { run_dequantize(files->first, files->second); });
}

}  // namespace nibble::cli::formats

// Model::save_quantized: a Hugging Face-style directory per FORMATS.md "Serialized quantized
// models". Quantized linears go through packed_io (NAME.qweight, NAME.scales, ...); everything
// else keeps its name and the model's dtype.
#include <fstream>

#include "model/weights.h"
#include "nibble/error.h"
#include "nibble/half.h"
#include "nibble/packed_io.h"
#include "nibble/progress.h"
#include "nibble/safetensors.h"

namespace nibble {
namespace {

// Copies a side file, writable by its owner even when the source is read-only.
void copy_side_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(to, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
}

// Tokenizer / generation files copied beside the weights when the source has them.
constexpr const char* kSideFiles[] = {"tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                                      "special_tokens_map.json", "generation_config.json",
                                      "tokenizer.bin"};

std::vector<uint8_t> to_16bit(const std::vector<float>& v, uint16_t (*conv)(float)) {
  std::vector<uint8_t> bytes(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = conv(v[i]);
    bytes[2 * i] = uint8_t(h & 0xFF);
    bytes[2 * i + 1] = uint8_t(h >> 8);
  }
  return bytes;
}

// A float tensor in the given dtype (values loaded from that dtype round-trip exactly).
void add_float(SafetensorsWriter& out, const std::string& name, std::vector<int64_t> shape,
               const std::vector<float>& v, DType dtype) {
  if (dtype == DType::BF16)
    out.add(name, dtype, std::move(shape), to_16bit(v, float_to_bf16));
  else if (dtype == DType::F16)
    out.add(name, dtype, std::move(shape), to_16bit(v, float_to_half));
  else
    out.add_f32(name, std::move(shape), v.data());
}

// An unquantized matrix in the dtype of the format it was kept in.
DType dtype_of(const PackedTensor& t) {
  if (t.format == "bf16") return DType::BF16;
  if (t.format == "fp16") return DType::F16;
  return DType::F32;
}

void add_matrix(SafetensorsWriter& out, const std::string& base, const PackedTensor& t, bool packed) {
  if (packed)
    write_packed(out, base, t);
  else
    add_float(out, base + ".weight", {t.rows, t.cols}, dequantize(t), dtype_of(t));
}

nlohmann::json quantization_config(const ModelWeights& w) {
  const LoadOptions& o = w.opts;
  const FormatInfo& f = find_format(o.weight_format);
  nlohmann::json q = {{"quant_method", "nibble"},
                      {"format", o.weight_format},
                      {"block_size", o.quant.block > 0 ? o.quant.block : f.default_block},
                      {"activation_format", o.act_format.empty() ? nlohmann::json() : nlohmann::json(o.act_format)},
                      {"quantize_embeddings", o.quantize_embeddings},
                      {"quantize_lm_head", o.quantize_lm_head},
                      {"modules_not_converted", w.nestedfp_ineligible}};
  if (o.quant.sv_a != 0 || o.quant.sv_b != 0) q["special_values"] = {o.quant.sv_a, o.quant.sv_b};
  else q["special_values"] = nullptr;  // the format's default pair (if it has one)
  return q;
}

DType model_dtype(const ModelConfig& c) {
  if (c.dtype == "bfloat16") return DType::BF16;
  if (c.dtype == "float16") return DType::F16;
  return DType::F32;
}

}  // namespace

void Model::save_quantized(const std::filesystem::path& out_dir) const {
  const ModelWeights& w = *w_;
  if (w.opts.weight_format.empty())
    throw Error("save_quantized: the model was loaded without a weight format; nothing to save");
  std::filesystem::create_directories(out_dir);
  const DType vec_dtype = model_dtype(w.cfg);
  SafetensorsWriter out;
  out.set_metadata("format", "pt");
  Progress bar("save", int64_t(w.layers.size()) + 1);
  if (!w.opts.progress) bar.finish();
  add_matrix(out, "model.embed_tokens", w.embed, w.embed_quantized);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add_float(out, p + "input_layernorm.weight", {int64_t(L.attn_norm.size())}, L.attn_norm, vec_dtype);
    add_float(out, p + "post_attention_layernorm.weight", {int64_t(L.ffn_norm.size())}, L.ffn_norm, vec_dtype);
    if (!L.q_norm.empty()) {
      add_float(out, p + "self_attn.q_norm.weight", {int64_t(L.q_norm.size())}, L.q_norm, vec_dtype);
      add_float(out, p + "self_attn.k_norm.weight", {int64_t(L.k_norm.size())}, L.k_norm, vec_dtype);
    }
    for (const LinearWeight* lw : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) {
      add_matrix(out, lw->name, lw->w, lw->quantized);
      if (!lw->bias.empty())
        add_float(out, lw->name + ".bias", {int64_t(lw->bias.size())}, lw->bias, vec_dtype);
    }
    bar.add();
  }
  add_float(out, "model.norm.weight", {int64_t(w.final_norm.size())}, w.final_norm, vec_dtype);
  if (w.lm_head) add_matrix(out, "lm_head", w.lm_head->w, w.lm_head->quantized);
  std::filesystem::remove(out_dir / "model.safetensors.index.json");  // a stale shard index would win
  out.write(out_dir / "model.safetensors");
  bar.finish();

  nlohmann::json cfg = w.cfg.raw;
  cfg["quantization_config"] = quantization_config(w);
  std::ofstream cf(out_dir / "config.json");
  cf << cfg.dump(2) << "\n";
  if (!cf) throw Error((out_dir / "config.json").string() + ": cannot write");
  const std::filesystem::path src_dir =
      std::filesystem::is_directory(w.source) ? w.source : w.source.parent_path();
  for (const char* name : kSideFiles)
    if (std::filesystem::exists(src_dir / name))
      copy_side_file(src_dir / name, out_dir / name);
  // A tokenizer given explicitly (or llama2.c's tokenizer.bin) comes along under its usual name.
  const std::filesystem::path tok = w.opts.tokenizer.empty() ? w.tokenizer_file : w.opts.tokenizer;
  if (!tok.empty()) {
    const std::string ext = tok.extension().string();
    const char* name = ext == ".json" ? "tokenizer.json" : ext == ".model" ? "tokenizer.model" : "tokenizer.bin";
    copy_side_file(tok, out_dir / name);
  }
}

}  // namespace nibble

// init_random: published architecture configs, the tensors a config implies, and the directory
// they are written to (config.json, stand-in tokenizer, README.txt, sharded safetensors).
#include "nibble/init_random.h"

#include <chrono>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/init_random_parts.h"
#include "nibble/error.h"
#include "nibble/model_config.h"
#include "nibble/paths.h"
#include "nibble/progress.h"

namespace nibble {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using init_random_detail::RandomTensor;
using init_random_detail::Spread;

// The stand-in tokenizer (see init_random.h) and its bos / eos: <|im_start|> = 1, <|im_end|> = 2.
constexpr const char* kTokenizerDir = "models/smollm2-135m-instruct-tokenizer";
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json"};
constexpr int kBos = 1, kEos = 2;

json llama31_8b() {  // meta-llama/Llama-3.1-8B config.json
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", 4096},
          {"intermediate_size", 14336},
          {"num_hidden_layers", 32},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 8},
          {"head_dim", 128},
          {"vocab_size", 128256},
          {"max_position_embeddings", 131072},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"rope_scaling",
           {{"rope_type", "llama3"},
            {"factor", 8.0},
            {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0},
            {"original_max_position_embeddings", 8192}}},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"hidden_act", "silu"},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", false},
          {"published_bos_token_id", 128000},
          {"published_eos_token_id", 128001}};
}

json qwen3_8b() {  // Qwen/Qwen3-8B config.json
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"model_type", "qwen3"},
          {"hidden_size", 4096},
          {"intermediate_size", 12288},
          {"num_hidden_layers", 36},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 8},
          {"head_dim", 128},
          {"vocab_size", 151936},
          {"max_position_embeddings", 40960},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0},
          {"rope_scaling", nullptr},
          {"attention_bias", false},
          {"hidden_act", "silu"},
          {"initializer_range", 0.02},
          {"use_sliding_window", false},
          {"sliding_window", nullptr},
          {"max_window_layers", 36},
          {"tie_word_embeddings", false},
          {"published_bos_token_id", 151643},
          {"published_eos_token_id", 151645}};
}

json tiny() {  // Llama-3 shaped (GQA, llama3 RoPE, untied), small enough for unit tests
  json j = llama31_8b();
  j.update({{"hidden_size", 64}, {"intermediate_size", 192}, {"num_hidden_layers", 2},
            {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
            {"vocab_size", 49152}, {"max_position_embeddings", 2048}});
  j.erase("published_bos_token_id");
  j.erase("published_eos_token_id");
  return j;
}

// The tensors of a validated config, in Hugging Face order per layer.
std::vector<RandomTensor> tensors_of(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, d = c.head_dim;
  const int64_t qd = c.num_heads * d, kd = c.num_kv_heads * d;
  std::vector<RandomTensor> ts{{"model.embed_tokens.weight", {V, H}, Spread::embedding}};
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    ts.push_back({p + "input_layernorm.weight", {H}, Spread::norm});
    for (auto [proj, rows] : {std::pair{"q_proj", qd}, {"k_proj", kd}, {"v_proj", kd}}) {
      ts.push_back({p + "self_attn." + proj + ".weight", {rows, H}, Spread::linear});
      if (c.attention_bias) ts.push_back({p + "self_attn." + proj + ".bias", {rows}, Spread::embedding});
    }
    if (c.qk_norm) {
      ts.push_back({p + "self_attn.q_norm.weight", {d}, Spread::norm});
      ts.push_back({p + "self_attn.k_norm.weight", {d}, Spread::norm});
    }
    ts.push_back({p + "self_attn.o_proj.weight", {H, qd}, Spread::linear});
    ts.push_back({p + "post_attention_layernorm.weight", {H}, Spread::norm});
    ts.push_back({p + "mlp.gate_proj.weight", {I, H}, Spread::linear});
    ts.push_back({p + "mlp.up_proj.weight", {I, H}, Spread::linear});
    ts.push_back({p + "mlp.down_proj.weight", {H, I}, Spread::linear});
  }
  ts.push_back({"model.norm.weight", {H}, Spread::norm});
  if (!c.tie_word_embeddings) ts.push_back({"lm_head.weight", {V, H}, Spread::linear});
  return ts;
}

const char* torch_dtype(DType t) {
  return t == DType::BF16 ? "bfloat16" : t == DType::F16 ? "float16" : "float32";
}

void prepare_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw Error(fmt::format("init-random: -o {}: exists and is not a directory", dir.string()));
    if (!fs::is_empty(dir, ec))
      throw Error(fmt::format("init-random: -o {}: directory is not empty (refusing to overwrite)", dir.string()));
  }
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("init-random: -o {}: cannot create directory: {}", dir.string(), ec.message()));
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.flush()) throw Error(fmt::format("{}: write failed", path.string()));
}

std::string readme(const json& config, const InitRandomOptions& opt, const fs::path& tok_src) {
  return fmt::format(
      "RANDOM WEIGHTS. This model was written by `nibble init-random` (seed {}, dtype {}).\n"
      "config.json holds the published hyperparameters of {} ({} layers), but every weight is random:\n"
      "linear layers N(0, 0.02) with 1/1024 heavy-tailed outliers (2 * 0.02 * Student-t(4)), norms\n"
      "1 + N(0, 0.05), embeddings N(0, 0.02). Use it for speed and memory measurements only.\n\n"
      "The tokenizer is NOT the model's own: it is a stand-in copied from {}\n"
      "(SmolLM2, 49152 entries; bos {} / eos {}). Prompts should use ids below 49152.\n",
      opt.seed, dtype_name(opt.dtype), config["architectures"][0].get<std::string>(),
      config["num_hidden_layers"].get<int>(), tok_src.string(), kBos, kEos);
}

}  // namespace

const std::vector<std::string>& random_archs() {
  static const std::vector<std::string> names{"llama-3.1-8b", "qwen3-8b", "tiny"};
  return names;
}

json random_arch_config(const std::string& arch) {
  json j;
  if (arch == "llama-3.1-8b") j = llama31_8b();
  else if (arch == "qwen3-8b") j = qwen3_8b();
  else if (arch == "tiny") j = tiny();
  else
    throw Error(fmt::format("init-random: --arch: unknown architecture \"{}\" (known: {})", arch,
                            fmt::join(random_archs(), ", ")));
  // The published token ids belong to the real tokenizer; the stand-in's are used instead.
  json note = json::object();
  for (const char* k : {"published_bos_token_id", "published_eos_token_id"})
    if (j.contains(k)) note[k] = j[k], j.erase(k);
  if (!note.empty()) j["nibble_init_random"] = note;
  j["bos_token_id"] = kBos;
  j["eos_token_id"] = kEos;
  j["torch_dtype"] = "bfloat16";
  return j;
}

DType random_weight_dtype(const std::string& name, const std::string& field) {
  if (name == "bf16") return DType::BF16;
  if (name == "fp16") return DType::F16;
  if (name == "fp32") return DType::F32;
  throw Error(fmt::format("init-random: {}: unknown dtype \"{}\" (bf16, fp16 or fp32)", field, name));
}

InitRandomSummary init_random(const std::string& arch, const fs::path& dir, const InitRandomOptions& opt) {
  return write_random_model(random_arch_config(arch), dir, opt);
}

InitRandomSummary write_random_model(const json& config_in, const fs::path& dir, const InitRandomOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  if (opt.dtype != DType::BF16 && opt.dtype != DType::F16 && opt.dtype != DType::F32)
    throw Error(fmt::format("init-random: dtype {} is not one of BF16, F16, F32", dtype_name(opt.dtype)));
  if (opt.layers < 0) throw Error(fmt::format("init-random: --layers: {} is negative", opt.layers));
  json config = config_in;
  if (opt.layers > 0) config["num_hidden_layers"] = opt.layers;
  config["torch_dtype"] = torch_dtype(opt.dtype);
  if (!config.contains("nibble_init_random") || !config["nibble_init_random"].is_object())
    config["nibble_init_random"] = json::object();
  config["nibble_init_random"].update({{"random_weights", true}, {"seed", opt.seed},
                                       {"tokenizer", "stand-in: SmolLM2 (49152 entries), not the model's own"}});
  const ModelConfig cfg = ModelConfig::from_json(config, "init-random config");
  const fs::path tok_src = (data_dir() / kTokenizerDir).lexically_normal();
  for (const char* f : kTokenizerFiles)
    if (!fs::is_regular_file(tok_src / f))
      throw Error(fmt::format("init-random: stand-in tokenizer file {} is missing (set NIBBLE_DATA?)",
                              (tok_src / f).string()));
  const std::vector<RandomTensor> tensors = tensors_of(cfg);

  prepare_dir(dir);
  write_text(dir / "config.json", config.dump(2) + "\n");
  write_text(dir / "README.txt", readme(config, opt, tok_src));
  for (const char* f : kTokenizerFiles) {
    fs::copy_file(tok_src / f, dir / f, fs::copy_options::overwrite_existing);
    fs::permissions(dir / f, fs::perms::owner_write, fs::perm_options::add);  // the source is read-only
  }

  InitRandomSummary s;
  s.tensors = int(tensors.size());
  for (const RandomTensor& t : tensors) s.parameters += t.numel();
  Progress bar("init-random (RANDOM weights)", s.parameters * int64_t(dtype_size(opt.dtype)));
  if (!opt.progress) bar.finish();
  const std::function<void(uint64_t)> on_bytes = [&bar](uint64_t b) { bar.update(int64_t(b)); };
  const auto r = init_random_detail::write_random_shards(dir, tensors, opt.seed, opt.dtype, opt.max_shard_bytes, on_bytes);
  bar.finish();
  s.shards = r.shards;
  s.bytes = r.bytes;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace nibble

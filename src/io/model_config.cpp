// ModelConfig: config.json of the supported Hugging Face causal LMs, read strictly. Defaults for
// optional fields are those of the transformers config classes.
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "nibble/error.h"
#include "nibble/model_config.h"

namespace nibble {

namespace {

using json = nlohmann::json;

struct Arch {
  const char* name;
  const char* model_type;
};
constexpr Arch kArchs[] = {{"LlamaForCausalLM", "llama"},
                           {"MistralForCausalLM", "mistral"},
                           {"Qwen2ForCausalLM", "qwen2"},
                           {"Qwen3ForCausalLM", "qwen3"}};

// Typed field access; every failure names the source file and the field.
class Reader {
 public:
  Reader(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(fmt::format("{}: field \"{}\" {}", source_, field, what));
  }
  const json* get(const json& obj, const std::string& key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  int to_int(const json& v, const std::string& field) const {
    if (!v.is_number_integer()) fail(field, fmt::format("must be an integer, got {}", v.dump()));
    const bool fits = v.is_number_unsigned()
                          ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<int>::max())
                          : v.get<int64_t>() >= std::numeric_limits<int>::min() &&
                                v.get<int64_t>() <= std::numeric_limits<int>::max();
    if (!fits)
      fail(field, fmt::format("is out of range: {}", v.dump()));
    return v.get<int>();
  }
  double to_double(const json& v, const std::string& field) const {
    if (!v.is_number()) fail(field, fmt::format("must be a number, got {}", v.dump()));
    return v.get<double>();
  }
  int required_int(const std::string& key) const {
    const json* v = get(j_, key);
    if (!v) fail(key, "is missing");
    return to_int(*v, key);
  }
  int int_or(const std::string& key, int dflt) const {
    const json* v = get(j_, key);
    return v ? to_int(*v, key) : dflt;
  }
  double double_or(const json& obj, const std::string& key, double dflt,
                   const std::string& field) const {
    const json* v = get(obj, key);
    return v ? to_double(*v, field) : dflt;
  }
  bool bool_or(const std::string& key, bool dflt) const {
    const json* v = get(j_, key);
    if (!v) return dflt;
    if (!v->is_boolean()) fail(key, fmt::format("must be true or false, got {}", v->dump()));
    return v->get<bool>();
  }
  std::string string_or(const std::string& key, const std::string& dflt) const {
    const json* v = get(j_, key);
    if (!v) return dflt;
    if (!v->is_string()) fail(key, fmt::format("must be a string, got {}", v->dump()));
    return v->get<std::string>();
  }
  // An int, or a list of ints of which the first counts (eos_token_id); -1 when absent.
  int token_id(const std::string& key) const {
    const json* v = get(j_, key);
    if (!v) return -1;
    if (v->is_array()) {
      if (v->empty()) fail(key, "is an empty list");
      return to_int((*v)[0], key);
    }
    return to_int(*v, key);
  }
  const json& root() const { return j_; }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string source_;
};

const Arch& read_architecture(const Reader& r) {
  const json* a = r.get(r.root(), "architectures");
  if (!a) r.fail("architectures", "is missing");
  if (!a->is_array() || a->empty() || !(*a)[0].is_string())
    r.fail("architectures", "must be a non-empty list of strings");
  const std::string name = (*a)[0].get<std::string>();
  std::string known;
  for (const Arch& arch : kArchs) {
    if (name == arch.name) return arch;
    known += fmt::format("{}{}", known.empty() ? "" : ", ", arch.name);
  }
  throw Error(fmt::format("{}: unsupported architecture \"{}\" (supported: {})", r.source(), name,
                          known));
}

// RoPE base and scaling, from top-level rope_theta / rope_scaling (transformers 4) or from
// rope_parameters {rope_theta, rope_type, ...} (transformers 5).
void read_rope(const Reader& r, ModelConfig& c) {
  const json* params = r.get(r.root(), "rope_parameters");
  const json* scaling = r.get(r.root(), "rope_scaling");
  if (params && !params->is_object()) r.fail("rope_parameters", "must be an object");
  if (scaling && !scaling->is_object()) r.fail("rope_scaling", "must be an object or null");
  c.rope_theta = r.double_or(r.root(), "rope_theta", 10000.0, "rope_theta");
  if (params) c.rope_theta = r.double_or(*params, "rope_theta", c.rope_theta, "rope_parameters.rope_theta");
  if (!(c.rope_theta > 0)) r.fail("rope_theta", "must be positive");

  const json* src = scaling ? scaling : params;
  if (!src) return;
  const std::string field = scaling ? "rope_scaling" : "rope_parameters";
  const json* type = r.get(*src, "rope_type");
  if (!type) type = r.get(*src, "type");
  if (!type || (type->is_string() && type->get<std::string>() == "default")) return;
  if (!type->is_string() || type->get<std::string>() != "llama3")
    r.fail(field + ".rope_type", fmt::format("{} is not supported (only \"default\" and \"llama3\")",
                                             type->dump()));
  RopeScaling& s = c.rope_scaling;
  s.type = "llama3";
  auto need = [&](const char* key) {
    const json* v = r.get(*src, key);
    if (!v) r.fail(field + "." + key, "is missing (required by llama3 rope scaling)");
    return v;
  };
  s.factor = r.to_double(*need("factor"), field + ".factor");
  s.low_freq_factor = r.to_double(*need("low_freq_factor"), field + ".low_freq_factor");
  s.high_freq_factor = r.to_double(*need("high_freq_factor"), field + ".high_freq_factor");
  s.original_max_positions = r.to_int(*need("original_max_position_embeddings"),
                                      field + ".original_max_position_embeddings");
  if (!(s.factor > 0) || !(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) ||
      s.original_max_positions <= 0)
    r.fail(field, "has inconsistent llama3 values (need factor > 0, high_freq_factor > "
                  "low_freq_factor > 0, original_max_position_embeddings > 0)");
}

void check_sizes(const Reader& r, const ModelConfig& c, bool head_dim_given) {
  const std::pair<const char*, int> positive[] = {
      {"hidden_size", c.hidden_size},         {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},    {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},           {"max_position_embeddings", c.max_positions}};
  for (auto [field, v] : positive)
    if (v <= 0) r.fail(field, fmt::format("must be positive, got {}", v));
  if (!head_dim_given && c.hidden_size % c.num_heads != 0)
    r.fail("hidden_size", fmt::format("{} is not divisible by num_attention_heads {}",
                                      c.hidden_size, c.num_heads));
  if (c.head_dim % 2 != 0) r.fail("head_dim", fmt::format("must be even for RoPE, got {}", c.head_dim));
  if (c.num_heads % c.num_kv_heads != 0)
    r.fail("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}",
                                              c.num_kv_heads, c.num_heads));
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", "must be positive");
}

}  // namespace

ModelConfig ModelConfig::from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw Error(fmt::format("{}: config is not a JSON object", source));
  const Reader r(j, source);
  ModelConfig c;
  const Arch& arch = read_architecture(r);
  c.architecture = arch.name;
  c.model_type = r.string_or("model_type", arch.model_type);
  c.hidden_size = r.required_int("hidden_size");
  c.intermediate_size = r.required_int("intermediate_size");
  c.num_layers = r.required_int("num_hidden_layers");
  c.num_heads = r.required_int("num_attention_heads");
  c.vocab_size = r.required_int("vocab_size");
  c.num_kv_heads = r.int_or("num_key_value_heads", c.num_heads);
  const bool head_dim_given = r.get(j, "head_dim") != nullptr;
  c.head_dim = r.int_or("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_positions = r.int_or("max_position_embeddings", 2048);
  c.rms_norm_eps = r.double_or(j, "rms_norm_eps", 1e-6, "rms_norm_eps");
  read_rope(r, c);
  c.tie_word_embeddings = r.bool_or("tie_word_embeddings", false);
  c.qk_norm = c.architecture == "Qwen3ForCausalLM";
  c.attention_bias = c.architecture == "Qwen2ForCausalLM" || r.bool_or("attention_bias", false);
  const bool sliding = c.architecture == "MistralForCausalLM" || r.bool_or("use_sliding_window", false);
  if (sliding && r.get(j, "sliding_window")) c.sliding_window = r.int_or("sliding_window", 0);
  c.bos_token_id = r.token_id("bos_token_id");
  c.eos_token_id = r.token_id("eos_token_id");
  c.dtype = r.string_or("dtype", r.string_or("torch_dtype", ""));
  if (const json* q = r.get(j, "quantization_config")) {
    if (!q->is_object()) r.fail("quantization_config", "must be an object");
    c.quantization = *q;
  }
  check_sizes(r, c, head_dim_given);
  c.raw = j;
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& dir_or_file) {
  const std::filesystem::path path = std::filesystem::is_directory(dir_or_file)
                                         ? dir_or_file / "config.json"
                                         : dir_or_file;
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open model config", path.string()));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
  return from_json(j, path.string());
}

}  // namespace nibble

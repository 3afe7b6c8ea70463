// llama2.c v0 checkpoint -> ModelConfig + float tensors under Hugging Face names (see llama2c.h).
#include "nibble/llama2c.h"

#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "nibble/error.h"

namespace nibble {

namespace {

struct Header {
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

// Walks the fp32 payload in file order, handing out tensors and checking bounds.
class Cursor {
 public:
  Cursor(const std::vector<float>& data, std::string file) : data_(data), file_(std::move(file)) {}
  std::vector<float> take(size_t n, const std::string& what) {
    if (n > data_.size() - pos_)
      throw Error(fmt::format("{}: truncated llama2.c checkpoint while reading {}", file_, what));
    std::vector<float> out(data_.begin() + std::ptrdiff_t(pos_), data_.begin() + std::ptrdiff_t(pos_ + n));
    pos_ += n;
    return out;
  }
  void skip(size_t n, const std::string& what) { take(n, what); }

 private:
  const std::vector<float>& data_;
  std::string file_;
  size_t pos_ = 0;
};

Header read_header(std::ifstream& in, const std::string& file) {
  int32_t h[7];
  if (!in.read(reinterpret_cast<char*>(h), sizeof h))
    throw Error(fmt::format("{}: too short for a llama2.c header (7 int32)", file));
  Header hd{h[0], h[1], h[2], h[3], h[4], h[5], h[6]};
  const std::pair<const char*, int> positive[] = {
      {"dim", hd.dim},           {"hidden_dim", hd.hidden_dim}, {"n_layers", hd.n_layers},
      {"n_heads", hd.n_heads},   {"n_kv_heads", hd.n_kv_heads}, {"seq_len", hd.seq_len}};
  for (auto [field, v] : positive)
    if (v <= 0) throw Error(fmt::format("{}: header field {} must be positive, got {}", file, field, v));
  if (hd.vocab_size == 0 || hd.vocab_size == INT32_MIN)
    throw Error(fmt::format("{}: header field vocab_size is invalid: {}", file, hd.vocab_size));
  if (hd.dim % hd.n_heads != 0 || (hd.dim / hd.n_heads) % 2 != 0)
    throw Error(fmt::format("{}: header dim {} is not n_heads {} times an even head size", file,
                            hd.dim, hd.n_heads));
  if (hd.n_heads % hd.n_kv_heads != 0)
    throw Error(fmt::format("{}: header n_kv_heads {} does not divide n_heads {}", file,
                            hd.n_kv_heads, hd.n_heads));
  return hd;
}

// Number of floats the header promises, in 128 bits so that a lying header cannot overflow it.
unsigned __int128 expected_floats(const Header& h) {
  using u128 = unsigned __int128;
  const u128 d = u128(h.dim), f = u128(h.hidden_dim), l = u128(h.n_layers);
  const u128 v = u128(h.vocab_size < 0 ? -int64_t(h.vocab_size) : h.vocab_size);
  const u128 hd = d / u128(h.n_heads), kv = u128(h.n_kv_heads) * hd;
  u128 n = v * d + l * (2 * d + d * d + 2 * kv * d + d * d + 3 * d * f) + d +
           u128(h.seq_len) * hd;  // two RoPE tables of seq_len * hd/2
  if (h.vocab_size < 0) n += v * d;
  return n;
}

ModelConfig make_config(const Header& h, const std::string& file) {
  const int vocab = h.vocab_size < 0 ? -h.vocab_size : h.vocab_size;
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", "llama"},
                      {"hidden_size", h.dim},
                      {"intermediate_size", h.hidden_dim},
                      {"num_hidden_layers", h.n_layers},
                      {"num_attention_heads", h.n_heads},
                      {"num_key_value_heads", h.n_kv_heads},
                      {"vocab_size", vocab},
                      {"max_position_embeddings", h.seq_len},
                      {"rms_norm_eps", 1e-5},
                      {"rope_theta", 10000.0},
                      {"tie_word_embeddings", h.vocab_size > 0},
                      {"bos_token_id", 1},
                      {"eos_token_id", 2},
                      {"torch_dtype", "float32"}};
  return ModelConfig::from_json(j, file);
}

}  // namespace

void llama2c_permute_rope_rows(std::vector<float>& w, int n_heads, int head_dim, int64_t cols) {
  const size_t c = size_t(cols), half = size_t(head_dim / 2);
  std::vector<float> head(size_t(head_dim) * c);
  for (int h = 0; h < n_heads; ++h) {
    float* base = w.data() + size_t(h) * size_t(head_dim) * c;
    for (size_t i = 0; i < half; ++i)
      for (size_t s = 0; s < 2; ++s)
        std::memcpy(&head[(s * half + i) * c], base + (2 * i + s) * c, c * sizeof(float));
    std::memcpy(base, head.data(), head.size() * sizeof(float));
  }
}

Llama2cModel load_llama2c(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open llama2.c checkpoint", file));
  const Header h = read_header(in, file);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  const unsigned __int128 want_bytes = 28 + 4 * expected_floats(h);
  if (ec || size != want_bytes)
    throw Error(fmt::format("{}: file is {} bytes but its header (dim {}, hidden_dim {}, n_layers "
                            "{}, n_heads {}, n_kv_heads {}, vocab_size {}, seq_len {}) implies {}",
                            file, size, h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads,
                            h.vocab_size, h.seq_len, double(want_bytes)));
  const size_t want = size_t((want_bytes - 28) / 4);
  std::vector<float> payload(want);
  if (!in.read(reinterpret_cast<char*>(payload.data()), std::streamsize(want * 4)))
    throw Error(fmt::format("{}: read failed", file));

  Llama2cModel m;
  m.config = make_config(h, file);
  const int64_t D = h.dim, F = h.hidden_dim, V = m.config.vocab_size;
  const int64_t hd = D / h.n_heads, KV = int64_t(h.n_kv_heads) * hd;
  Cursor cur(payload, file);
  auto put = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    m.tensors[name] = {std::move(shape), std::move(data)};
  };
  auto layer = [](int i, const char* rest) { return fmt::format("model.layers.{}.{}", i, rest); };
  // Each per-layer group is stored for all layers before the next group begins.
  auto per_layer = [&](const char* hf, std::vector<int64_t> shape) {
    const size_t n = size_t(shape.size() == 1 ? shape[0] : shape[0] * shape[1]);
    for (int i = 0; i < h.n_layers; ++i) put(layer(i, hf), shape, cur.take(n, layer(i, hf)));
  };
  put("model.embed_tokens.weight", {V, D}, cur.take(size_t(V * D), "token embedding"));
  per_layer("input_layernorm.weight", {D});
  per_layer("self_attn.q_proj.weight", {D, D});
  per_layer("self_attn.k_proj.weight", {KV, D});
  per_layer("self_attn.v_proj.weight", {KV, D});
  per_layer("self_attn.o_proj.weight", {D, D});
  per_layer("post_attention_layernorm.weight", {D});
  per_layer("mlp.gate_proj.weight", {F, D});
  per_layer("mlp.down_proj.weight", {D, F});
  per_layer("mlp.up_proj.weight", {F, D});
  put("model.norm.weight", {D}, cur.take(size_t(D), "final norm"));
  cur.skip(size_t(h.seq_len * hd), "RoPE tables");
  if (h.vocab_size < 0) put("lm_head.weight", {V, D}, cur.take(size_t(V * D), "classifier"));
  for (int i = 0; i < h.n_layers; ++i) {
    llama2c_permute_rope_rows(m.tensors[layer(i, "self_attn.q_proj.weight")].data, h.n_heads, int(hd), D);
    llama2c_permute_rope_rows(m.tensors[layer(i, "self_attn.k_proj.weight")].data, h.n_kv_heads, int(hd), D);
  }
  return m;
}

}  // namespace nibble

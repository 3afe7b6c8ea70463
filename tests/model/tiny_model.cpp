#include "model/tiny_model.h"

#include <cmath>
#include <fstream>
#include <numbers>

#include "nibble/paths.h"
#include "nibble/safetensors.h"

namespace nibble::test {

nlohmann::json TinySpec::config() const {
  nlohmann::json j = {{"architectures", {arch}},
                      {"hidden_size", hidden},
                      {"intermediate_size", inter},
                      {"num_hidden_layers", layers},
                      {"num_attention_heads", heads},
                      {"num_key_value_heads", kv_heads},
                      {"head_dim", head_dim},
                      {"vocab_size", vocab},
                      {"max_position_embeddings", 64},
                      {"rms_norm_eps", eps},
                      {"rope_theta", theta},
                      {"tie_word_embeddings", tied},
                      {"torch_dtype", "float32"}};
  if (llama3_rope)
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 16}};
  return j;
}

LoadOptions tiny_options() {
  LoadOptions o;
  o.tokenizer = data_dir() / "models" / "aidreams260K-llama2c" / "tok512.bin";
  return o;
}

TinyModel::~TinyModel() {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

std::filesystem::path fresh_temp_dir(const std::string& tag) {
  std::random_device rd;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("nibble_" + tag + "_" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir;
}

TinyModel make_tiny_model(const TinySpec& s, std::mt19937& gen) {
  TinyModel m;
  m.spec = s;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float sd, float mean = 0) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = mean + sd * nd(gen);
    m.tensors[name] = v;
    m.shapes[name] = shape;
  };
  const int64_t H = s.hidden, qd = int64_t(s.heads) * s.head_dim, kd = int64_t(s.kv_heads) * s.head_dim;
  add("model.embed_tokens.weight", {s.vocab, H}, 1.0f);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {qd, H}, 0.3f);
    add(p + "self_attn.k_proj.weight", {kd, H}, 0.3f);
    add(p + "self_attn.v_proj.weight", {kd, H}, 0.3f);
    add(p + "self_attn.o_proj.weight", {H, qd}, 0.2f);
    add(p + "mlp.gate_proj.weight", {s.inter, H}, 0.2f);
    add(p + "mlp.up_proj.weight", {s.inter, H}, 0.2f);
    add(p + "mlp.down_proj.weight", {H, s.inter}, 0.2f);
    if (s.arch == "Qwen2ForCausalLM") {
      add(p + "self_attn.q_proj.bias", {qd}, 0.3f);
      add(p + "self_attn.k_proj.bias", {kd}, 0.3f);
      add(p + "self_attn.v_proj.bias", {kd}, 0.3f);
    }
    if (s.arch == "Qwen3ForCausalLM") {
      add(p + "self_attn.q_norm.weight", {s.head_dim}, 0.1f, 1.0f);
      add(p + "self_attn.k_norm.weight", {s.head_dim}, 0.1f, 1.0f);
    }
  }
  add("model.norm.weight", {H}, 0.1f, 1.0f);
  if (!s.tied) add("lm_head.weight", {s.vocab, H}, 0.3f);
  m.dir = fresh_temp_dir("tiny");
  SafetensorsWriter w;
  for (const auto& [name, v] : m.tensors) w.add_f32(name, m.shapes[name], v.data());
  w.write(m.dir / "model.safetensors");
  std::ofstream(m.dir / "config.json") << s.config().dump(2);
  return m;
}

namespace {

using Vec = std::vector<double>;

Vec get(const Tensors& t, const std::string& name) {
  const std::vector<float>& f = t.at(name);
  return Vec(f.begin(), f.end());
}

// y[r] = W[r] . x (+ b[r]) for W [rows, cols]
Vec matvec(const Vec& W, const Vec& x, size_t rows, const Vec* b = nullptr) {
  const size_t cols = x.size();
  Vec y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double s = b ? (*b)[r] : 0.0;
    for (size_t c = 0; c < cols; ++c) s += W[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

double inv_freq(const TinySpec& s, int i) {
  double f = std::pow(s.theta, -2.0 * i / s.head_dim);
  if (!s.llama3_rope) return f;
  const double factor = 8, low = 1, high = 4, old = 16;  // as in TinySpec::config
  const double wavelen = 2 * std::numbers::pi / f;
  if (wavelen < old / high) return f;
  if (wavelen > old / low) return f / factor;
  const double smooth = (old / wavelen - low) / (high - low);
  return (1 - smooth) * f / factor + smooth * f;
}

// Rotates one head vector at position pos (HF half rotation: i pairs with i + d/2).
void rope(double* v, int d, int pos, const TinySpec& s) {
  for (int i = 0; i < d / 2; ++i) {
    const double a = pos * inv_freq(s, i), c = std::cos(a), sn = std::sin(a);
    const double x = v[i], y = v[i + d / 2];
    v[i] = x * c - y * sn;
    v[i + d / 2] = y * c + x * sn;
  }
}

}  // namespace

std::vector<double> reference_forward(const TinySpec& s, const Tensors& t, const std::vector<int>& ids,
                                      const HeadQuant& kv) {
  const size_t T = ids.size(), H = size_t(s.hidden), d = size_t(s.head_dim);
  const size_t qd = size_t(s.heads) * d, kd = size_t(s.kv_heads) * d;
  const Vec emb = get(t, "model.embed_tokens.weight");
  std::vector<Vec> x(T);
  for (size_t i = 0; i < T; ++i) x[i] = Vec(emb.begin() + ids[i] * H, emb.begin() + (ids[i] + 1) * H);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    auto W = [&](const std::string& n) { return get(t, p + n); };
    const bool bias = s.arch == "Qwen2ForCausalLM", qkn = s.arch == "Qwen3ForCausalLM";
    std::vector<Vec> q(T), k(T), v(T);
    for (size_t i = 0; i < T; ++i) {
      const Vec h = rmsnorm(x[i], W("input_layernorm.weight"), s.eps);
      Vec bq, bk, bv;
      if (bias) bq = W("self_attn.q_proj.bias"), bk = W("self_attn.k_proj.bias"), bv = W("self_attn.v_proj.bias");
      q[i] = matvec(W("self_attn.q_proj.weight"), h, qd, bias ? &bq : nullptr);
      k[i] = matvec(W("self_attn.k_proj.weight"), h, kd, bias ? &bk : nullptr);
      v[i] = matvec(W("self_attn.v_proj.weight"), h, kd, bias ? &bv : nullptr);
      for (size_t hh = 0; hh < size_t(s.heads); ++hh) {
        if (qkn) {
          Vec head(q[i].begin() + hh * d, q[i].begin() + (hh + 1) * d);
          head = rmsnorm(head, W("self_attn.q_norm.weight"), s.eps);
          std::copy(head.begin(), head.end(), q[i].begin() + hh * d);
        }
        rope(q[i].data() + hh * d, int(d), int(i), s);
      }
      for (size_t g = 0; g < size_t(s.kv_heads); ++g) {
        if (qkn) {
          Vec head(k[i].begin() + g * d, k[i].begin() + (g + 1) * d);
          head = rmsnorm(head, W("self_attn.k_norm.weight"), s.eps);
          std::copy(head.begin(), head.end(), k[i].begin() + g * d);
        }
        rope(k[i].data() + g * d, int(d), int(i), s);
      }
      if (kv)
        for (size_t g = 0; g < size_t(s.kv_heads); ++g) kv(k[i].data() + g * d, d), kv(v[i].data() + g * d, d);
    }
    for (size_t i = 0; i < T; ++i) {
      Vec att(qd, 0.0);
      for (size_t hh = 0; hh < size_t(s.heads); ++hh) {
        const size_t g = hh / size_t(s.heads / s.kv_heads);
        Vec sc(i + 1);
        double mx = -1e300;
        for (size_t j = 0; j <= i; ++j) {
          double dd = 0;
          for (size_t e = 0; e < d; ++e) dd += q[i][hh * d + e] * k[j][g * d + e];
          sc[j] = dd / std::sqrt(double(d));
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (double& z : sc) sum += (z = std::exp(z - mx));
        for (size_t j = 0; j <= i; ++j)
          for (size_t e = 0; e < d; ++e) att[hh * d + e] += sc[j] / sum * v[j][g * d + e];
      }
      const Vec o = matvec(W("self_attn.o_proj.weight"), att, H);
      for (size_t e = 0; e < H; ++e) x[i][e] += o[e];
      const Vec h = rmsnorm(x[i], W("post_attention_layernorm.weight"), s.eps);
      Vec g = matvec(W("mlp.gate_proj.weight"), h, size_t(s.inter));
      const Vec u = matvec(W("mlp.up_proj.weight"), h, size_t(s.inter));
      for (size_t e = 0; e < g.size(); ++e) g[e] = g[e] / (1 + std::exp(-g[e])) * u[e];
      const Vec dn = matvec(W("mlp.down_proj.weight"), g, H);
      for (size_t e = 0; e < H; ++e) x[i][e] += dn[e];
    }
  }
  const Vec head = get(t, s.tied ? "model.embed_tokens.weight" : "lm_head.weight");
  std::vector<double> logits;
  for (size_t i = 0; i < T; ++i) {
    const Vec y = matvec(head, rmsnorm(x[i], get(t, "model.norm.weight"), s.eps), size_t(s.vocab));
    logits.insert(logits.end(), y.begin(), y.end());
  }
  return logits;
}

}  // namespace nibble::test

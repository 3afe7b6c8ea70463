// llama2.c v0 checkpoints: synthetic random files (tensor placement, q/k permutation, RoPE
// equivalence against llama2.c's interleaved rotation), malformed files, and the aidreams model.
#include <gtest/gtest.h>

#include <cmath>

#include "io_test_util.h"
#include "nibble/llama2c.h"
#include "nibble/paths.h"

using io_test::expect_error;
using io_test::TempDir;
using namespace nibble;

namespace {

struct Synthetic {
  int dim, hidden, layers, heads, kv_heads, vocab, seq_len;  // vocab < 0: unshared classifier
  std::vector<float> payload;
  int head_dim() const { return dim / heads; }
};

// Fills a checkpoint's payload with random floats; the layout is rebuilt in the test from
// llama2.c's run.c (memory_map_weights), independently of the loader.
Synthetic make_synthetic(io_test::Rng& rng, bool shared) {
  Synthetic s;
  s.kv_heads = rng.uniform(1, 3);
  s.heads = s.kv_heads * rng.uniform(1, 3);
  s.dim = s.heads * 2 * rng.uniform(1, 4);
  s.hidden = rng.uniform(1, 40);
  s.layers = rng.uniform(1, 3);
  s.vocab = rng.uniform(2, 50) * (shared ? 1 : -1);
  s.seq_len = rng.uniform(1, 9);
  const size_t d = size_t(s.dim), f = size_t(s.hidden), l = size_t(s.layers);
  const size_t v = size_t(std::abs(s.vocab)), kv = size_t(s.kv_heads * s.head_dim());
  size_t n = v * d + l * (d + d * d + 2 * d * kv + d * d + d + 3 * d * f) + d +
             size_t(s.seq_len * s.head_dim()) + (shared ? 0 : v * d);
  s.payload.resize(n);
  for (auto& x : s.payload) x = rng.normal();
  return s;
}

void write_checkpoint(const std::filesystem::path& p, const Synthetic& s, long extra_bytes = 0) {
  int32_t h[7] = {s.dim, s.hidden, s.layers, s.heads, s.kv_heads, s.vocab, s.seq_len};
  std::string bytes(reinterpret_cast<const char*>(h), sizeof h);
  bytes.append(reinterpret_cast<const char*>(s.payload.data()), s.payload.size() * 4);
  if (extra_bytes < 0) bytes.erase(bytes.size() - size_t(-extra_bytes));  // a truncated file
  else bytes.append(size_t(extra_bytes), '\0');
  io_test::write_bytes(p, bytes);
}

// Attention scores q.k (double) after RoPE at positions pq, pk: llama2.c's interleaved pairs.
double score_interleaved(const double* q, const double* k, int hd, int pq, int pk) {
  double acc = 0;
  for (int i = 0; i < hd; i += 2) {
    const double freq = 1.0 / std::pow(10000.0, double(i) / hd);
    auto rot = [&](const double* x, int pos, double& a, double& b) {
      const double c = std::cos(pos * freq), sn = std::sin(pos * freq);
      a = x[i] * c - x[i + 1] * sn;
      b = x[i] * sn + x[i + 1] * c;
    };
    double qa, qb, ka, kb;
    rot(q, pq, qa, qb);
    rot(k, pk, ka, kb);
    acc += qa * ka + qb * kb;
  }
  return acc;
}

// The same with Hugging Face's rotate-half pairing (i, i + hd/2).
double score_half(const double* q, const double* k, int hd, int pq, int pk) {
  double acc = 0;
  const int half = hd / 2;
  for (int i = 0; i < half; ++i) {
    const double freq = 1.0 / std::pow(10000.0, 2.0 * i / hd);
    auto rot = [&](const double* x, int pos, double& a, double& b) {
      const double c = std::cos(pos * freq), sn = std::sin(pos * freq);
      a = x[i] * c - x[i + half] * sn;
      b = x[i] * sn + x[i + half] * c;
    };
    double qa, qb, ka, kb;
    rot(q, pq, qa, qb);
    rot(k, pk, ka, kb);
    acc += qa * ka + qb * kb;
  }
  return acc;
}

std::vector<double> matvec(const float* w, int rows, int cols, const std::vector<double>& x) {
  std::vector<double> y(size_t(rows), 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) y[size_t(r)] += double(w[size_t(r) * size_t(cols) + size_t(c)]) * x[size_t(c)];
  return y;
}

}  // namespace

TEST(Llama2c, SyntheticTensorsLandUnderHfNames) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  for (bool shared : {true, false}) {
    const Synthetic s = make_synthetic(rng, shared);
    write_checkpoint(dir / "m.bin", s);
    const Llama2cModel m = load_llama2c(dir / "m.bin");
    const ModelConfig& c = m.config;
    EXPECT_EQ(c.architecture, "LlamaForCausalLM");
    EXPECT_EQ(c.hidden_size, s.dim);
    EXPECT_EQ(c.intermediate_size, s.hidden);
    EXPECT_EQ(c.num_layers, s.layers);
    EXPECT_EQ(c.num_heads, s.heads);
    EXPECT_EQ(c.num_kv_heads, s.kv_heads);
    EXPECT_EQ(c.vocab_size, std::abs(s.vocab));
    EXPECT_EQ(c.max_positions, s.seq_len);
    EXPECT_EQ(c.tie_word_embeddings, shared);
    EXPECT_EQ(c.rope_theta, 10000.0);
    EXPECT_EQ(c.rms_norm_eps, 1e-5);

    // Walk the payload in run.c's order and compare.
    const int D = s.dim, F = s.hidden, L = s.layers, hd = s.head_dim(), V = std::abs(s.vocab);
    const int KV = s.kv_heads * hd;
    size_t off = 0;
    auto check = [&](const std::string& name, std::vector<int64_t> shape, bool rope_rows) {
      const FloatTensor& t = m.tensors.at(name);
      EXPECT_EQ(t.shape, shape) << name;
      const size_t cols = shape.size() == 2 ? size_t(shape[1]) : 1, rows = size_t(shape[0]);
      ASSERT_EQ(t.data.size(), rows * cols) << name;
      for (size_t r = 0; r < rows; ++r) {
        size_t src = r;  // rope rows: head h, new row s*hd/2+i comes from old row 2i+s
        if (rope_rows) {
          const size_t h = r / size_t(hd), j = r % size_t(hd), half = size_t(hd / 2);
          src = h * size_t(hd) + 2 * (j % half) + j / half;
        }
        for (size_t col = 0; col < cols; ++col)
          ASSERT_EQ(t.data[r * cols + col], s.payload[off + src * cols + col]) << name << " " << r;
      }
      off += rows * cols;
    };
    auto per_layer = [&](const char* hf, std::vector<int64_t> shape, bool rope_rows = false) {
      for (int i = 0; i < L; ++i) check("model.layers." + std::to_string(i) + "." + hf, shape, rope_rows);
    };
    check("model.embed_tokens.weight", {V, D}, false);
    per_layer("input_layernorm.weight", {D});
    per_layer("self_attn.q_proj.weight", {D, D}, true);
    per_layer("self_attn.k_proj.weight", {KV, D}, true);
    per_layer("self_attn.v_proj.weight", {KV, D});
    per_layer("self_attn.o_proj.weight", {D, D});
    per_layer("post_attention_layernorm.weight", {D});
    per_layer("mlp.gate_proj.weight", {F, D});
    per_layer("mlp.down_proj.weight", {D, F});
    per_layer("mlp.up_proj.weight", {F, D});
    check("model.norm.weight", {D}, false);
    off += size_t(s.seq_len * hd);
    if (!shared) check("lm_head.weight", {V, D}, false);
    EXPECT_EQ(off, s.payload.size());
    EXPECT_EQ(m.tensors.size(), size_t(2 + 9 * L + (shared ? 0 : 1)));
  }
}

TEST(Llama2c, PermutedWeightsGiveLlama2cAttentionScores) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  Synthetic s = make_synthetic(rng, true);
  while (s.head_dim() < 4) s = make_synthetic(rng, true);  // head_dim 2: both pairings coincide
  write_checkpoint(dir / "m.bin", s);
  const Llama2cModel m = load_llama2c(dir / "m.bin");
  const int D = s.dim, hd = s.head_dim(), V = std::abs(s.vocab);
  const float* wq_orig = s.payload.data() + size_t(V * D + s.layers * D);  // layer 0
  const float* wk_orig = wq_orig + size_t(s.layers * D * D);
  std::vector<double> x(static_cast<size_t>(D));
  for (auto& v : x) v = rng.normal();
  const auto q0 = matvec(wq_orig, D, D, x), k0 = matvec(wk_orig, s.kv_heads * hd, D, x);
  const auto q1 = matvec(m.tensors.at("model.layers.0.self_attn.q_proj.weight").data.data(), D, D, x);
  const auto k1 = matvec(m.tensors.at("model.layers.0.self_attn.k_proj.weight").data.data(),
                         s.kv_heads * hd, D, x);
  const int group = s.heads / s.kv_heads;
  double unpermuted_gap = 0;  // the test's own sensitivity: without the permutation scores differ
  for (int h = 0; h < s.heads; ++h) {
    const int kvh = h / group, pq = rng.uniform(0, 50), pk = rng.uniform(51, 100);
    const double a = score_interleaved(&q0[size_t(h * hd)], &k0[size_t(kvh * hd)], hd, pq, pk);
    const double b = score_half(&q1[size_t(h * hd)], &k1[size_t(kvh * hd)], hd, pq, pk);
    EXPECT_NEAR(a, b, 1e-9 * (1 + std::fabs(a))) << "head " << h;
    const double wrong = score_half(&q0[size_t(h * hd)], &k0[size_t(kvh * hd)], hd, pq, pk);
    unpermuted_gap = std::max(unpermuted_gap, std::fabs(a - wrong));
  }
  EXPECT_GT(unpermuted_gap, 1e-6);
}

TEST(Llama2c, MalformedFiles) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  const auto p = dir / "bad.bin";
  Synthetic s = make_synthetic(rng, rng.uniform(0, 1) == 1);
  write_checkpoint(p, s, -4);
  expect_error([&] { load_llama2c(p); }, {p.string(), "bytes", "implies"});
  write_checkpoint(p, s, 4);
  expect_error([&] { load_llama2c(p); }, {p.string(), "bytes", "implies"});
  io_test::write_bytes(p, std::string(20, '\0'));
  expect_error([&] { load_llama2c(p); }, {p.string(), "header"});
  Synthetic bad = s;
  bad.heads = 0;
  write_checkpoint(p, bad);
  expect_error([&] { load_llama2c(p); }, {p.string(), "n_heads"});
  bad = s;
  bad.dim = bad.heads * (1 << 26);  // a lying header must not overflow or allocate
  bad.layers = 1 << 30;
  write_checkpoint(p, bad);
  expect_error([&] { load_llama2c(p); }, {p.string(), "implies"});
  expect_error([&] { load_llama2c(dir / "absent.bin"); }, {"absent.bin", "cannot open"});
}

TEST(Llama2c, AidreamsModelLoads) {
  const auto p = data_dir() / "models" / "aidreams260K-llama2c" / "aidreams260K.bin";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << p << " not present";
  const Llama2cModel m = load_llama2c(p);
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_positions, 128);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(m.tensors.count("lm_head.weight"), 0u);
  EXPECT_EQ(m.tensors.size(), size_t(2 + 9 * 4));
  auto shape = [&](const std::string& n) { return m.tensors.at(n).shape; };
  using S = std::vector<int64_t>;
  EXPECT_EQ(shape("model.embed_tokens.weight"), (S{512, 64}));
  EXPECT_EQ(shape("model.norm.weight"), (S{64}));
  for (int i = 0; i < 4; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    EXPECT_EQ(shape(l + "self_attn.q_proj.weight"), (S{64, 64}));
    EXPECT_EQ(shape(l + "self_attn.k_proj.weight"), (S{64, 64}));
    EXPECT_EQ(shape(l + "mlp.gate_proj.weight"), (S{172, 64}));
    EXPECT_EQ(shape(l + "mlp.down_proj.weight"), (S{64, 172}));
    EXPECT_EQ(shape(l + "input_layernorm.weight"), (S{64}));
  }
  for (const auto& [name, t] : m.tensors)
    for (float v : t.data) ASSERT_TRUE(std::isfinite(v)) << name;
}

// init_random: the configs parse with the published values, written models load and match the
// float64 reference forward pass, the bytes depend only on the seed (not on threads or slabs), the
// spread matches the documented distributions, and bad arguments give clear errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>

#include "model/init_random_parts.h"
#include "model/tiny_model.h"
#include "nibble/error.h"
#include "nibble/half.h"
#include "nibble/init_random.h"
#include "nibble/model.h"
#include "nibble/model_config.h"
#include "nibble/safetensors.h"

namespace nibble {
namespace {

namespace fs = std::filesystem;
using init_random_detail::fill_random;
using init_random_detail::kChunk;
using init_random_detail::RandomTensor;
using init_random_detail::Spread;

struct TempDir {
  fs::path path = test::fresh_temp_dir("init_random");
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

uint64_t fresh_seed() { return (uint64_t(std::random_device{}()) << 32) | std::random_device{}(); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

template <class F>
void expect_error_mentions(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected nibble::Error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(InitRandom, PublishedConfigs) {
  const ModelConfig l = ModelConfig::from_json(random_arch_config("llama-3.1-8b"), "llama");
  EXPECT_EQ(l.architecture, "LlamaForCausalLM");
  EXPECT_EQ(l.hidden_size, 4096);
  EXPECT_EQ(l.num_layers, 32);
  EXPECT_EQ(l.num_heads, 32);
  EXPECT_EQ(l.num_kv_heads, 8);
  EXPECT_EQ(l.head_dim, 128);
  EXPECT_EQ(l.intermediate_size, 14336);
  EXPECT_EQ(l.vocab_size, 128256);
  EXPECT_EQ(l.max_positions, 131072);
  EXPECT_EQ(l.rope_theta, 500000.0);
  EXPECT_EQ(l.rms_norm_eps, 1e-5);
  EXPECT_EQ(l.rope_scaling.type, "llama3");
  EXPECT_EQ(l.rope_scaling.factor, 8.0);
  EXPECT_EQ(l.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(l.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(l.rope_scaling.original_max_positions, 8192);
  EXPECT_FALSE(l.tie_word_embeddings);
  EXPECT_FALSE(l.qk_norm);

  const ModelConfig q = ModelConfig::from_json(random_arch_config("qwen3-8b"), "qwen3");
  EXPECT_EQ(q.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(q.hidden_size, 4096);
  EXPECT_EQ(q.num_layers, 36);
  EXPECT_EQ(q.num_heads, 32);
  EXPECT_EQ(q.num_kv_heads, 8);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.intermediate_size, 12288);
  EXPECT_EQ(q.vocab_size, 151936);
  EXPECT_EQ(q.max_positions, 40960);
  EXPECT_EQ(q.rope_theta, 1000000.0);
  EXPECT_EQ(q.rms_norm_eps, 1e-6);
  EXPECT_EQ(q.rope_scaling.type, "");
  EXPECT_TRUE(q.qk_norm);
  EXPECT_FALSE(q.tie_word_embeddings);
  for (const ModelConfig* c : {&l, &q}) {  // the stand-in tokenizer's ids, inside its 49152
    EXPECT_EQ(c->bos_token_id, 1);
    EXPECT_EQ(c->eos_token_id, 2);
  }
}

// A TinySpec model written with random weights matches the float64 reference on the same tensors.
void check_written_model(const test::TinySpec& spec) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(spec.arch + " seed " + std::to_string(seed));
  TempDir dir;
  InitRandomOptions opt;
  opt.seed = seed;
  write_random_model(spec.config(), dir.path, opt);
  const auto m = Model::load(dir.path);
  const TensorStore store = TensorStore::open_dir(dir.path);
  test::Tensors tensors;
  for (const std::string& name : store.names()) {
    EXPECT_EQ(store.at(name).dtype, DType::BF16) << name;
    tensors[name] = store.at(name).to_float();
  }
  EXPECT_EQ(tensors.count("lm_head.weight"), spec.tied ? 0u : 1u);
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::uniform_int_distribution<int> id(0, spec.vocab - 1);
  std::vector<int> ids(7);
  for (int& i : ids) i = id(gen);
  const std::vector<double> want = test::reference_forward(spec, tensors, ids);
  Session s(*m, 16);
  const std::vector<float> got = s.forward(std::vector<int32_t>(ids.begin(), ids.end()), true);
  ASSERT_EQ(got.size(), want.size());
  double max_abs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(want[i]));
    ASSERT_NEAR(got[i], want[i], 2e-5 + 1e-4 * std::fabs(want[i])) << "logit " << i;
  }
  EXPECT_GT(max_abs, 1e-3);  // the weights are not degenerate
}

TEST(InitRandom, WrittenLlamaMatchesReference) {
  test::TinySpec s;
  s.llama3_rope = true;
  check_written_model(s);
}
TEST(InitRandom, WrittenQwen3MatchesReference) {
  test::TinySpec s;
  s.arch = "Qwen3ForCausalLM";
  check_written_model(s);
}
TEST(InitRandom, WrittenQwen2TiedMatchesReference) {
  test::TinySpec s;
  s.arch = "Qwen2ForCausalLM";
  s.tied = true;
  check_written_model(s);
}

TEST(InitRandom, TinyArchLoadsAndRuns) {
  TempDir dir;
  InitRandomOptions opt;
  opt.seed = fresh_seed();
  const InitRandomSummary s = init_random("tiny", dir.path / "model", opt);
  EXPECT_EQ(s.shards, 1);
  EXPECT_EQ(s.bytes, uint64_t(s.parameters) * 2);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "README.txt", "model.safetensors"})
    EXPECT_TRUE(fs::is_regular_file(dir.path / "model" / f)) << f;
  EXPECT_NE(read_file(dir.path / "model" / "README.txt").find("RANDOM"), std::string::npos);
  const auto m = Model::load(dir.path / "model");
  EXPECT_EQ(m->tokenizer().vocab_size(), 49152);
  const std::vector<int32_t> prompt = m->tokenizer().encode("The weights are random.");
  ASSERT_FALSE(prompt.empty());
  Session sess(*m, 64);
  const std::vector<float> logits = sess.forward(prompt);
  ASSERT_EQ(logits.size(), size_t(m->config().vocab_size));
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  LoadOptions nvfp4;
  nvfp4.weight_format = "nvfp4";
  const auto q = Model::load(dir.path / "model", nvfp4);
  EXPECT_GT(q->weight_rel_mse(), 0.0);
  EXPECT_LT(q->weight_rel_mse(), 0.05);
}

std::map<std::string, std::string> dir_bytes(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files[e.path().filename().string()] = read_file(e.path());
  return files;
}

TEST(InitRandom, SameSeedSameBytesWhateverTheThreads) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TempDir dir;
  InitRandomOptions opt;
  opt.seed = seed;
  opt.max_shard_bytes = 2'000'000;  // several shards + index
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const InitRandomSummary s = init_random("tiny", dir.path / "a", opt);
  omp_set_num_threads(3);
  init_random("tiny", dir.path / "b", opt);
  omp_set_num_threads(threads);
  opt.seed = seed + 1;
  init_random("tiny", dir.path / "c", opt);

  EXPECT_GT(s.shards, 2);
  const auto a = dir_bytes(dir.path / "a"), b = dir_bytes(dir.path / "b"), c = dir_bytes(dir.path / "c");
  EXPECT_EQ(a.size(), size_t(s.shards) + 5);  // + index, config, README, 2 tokenizer files
  ASSERT_TRUE(a.count("model.safetensors.index.json"));
  for (const auto& [name, bytes] : a) {
    EXPECT_TRUE(bytes == b.at(name)) << name << " differs between 1 and 3 threads";
    if (name.ends_with(".safetensors")) {
      EXPECT_FALSE(bytes == c.at(name)) << name << " is the same for another seed";
      // over the limit only as a single tensor too large for any shard (the embedding, lm_head)
      if (bytes.size() > 2'000'000u + 100'000u) {
        EXPECT_EQ(SafetensorsFile::open(dir.path / "a" / name)->tensors().size(), 1u) << name;
      }
    }
  }
  EXPECT_EQ(TensorStore::open_dir(dir.path / "a").names().size(), size_t(s.tensors));
}

TEST(InitRandom, SlabsMatchTheWholeTensor) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const RandomTensor t{"w", {5 * kChunk + 123}, Spread::linear};
  std::vector<float> whole(size_t(t.numel())), part(size_t(t.numel()));
  fill_random(t, seed, 0, t.numel(), DType::F32, reinterpret_cast<uint8_t*>(whole.data()));
  fill_random(t, seed, 0, 2 * kChunk, DType::F32, reinterpret_cast<uint8_t*>(part.data()));
  fill_random(t, seed, 2 * kChunk, t.numel(), DType::F32, reinterpret_cast<uint8_t*>(part.data() + 2 * kChunk));
  EXPECT_TRUE(whole == part);
  std::vector<uint16_t> bf(size_t(t.numel()));
  fill_random(t, seed, 0, t.numel(), DType::BF16, reinterpret_cast<uint8_t*>(bf.data()));
  for (size_t i = 0; i < bf.size(); i += 997) ASSERT_EQ(bf[i], float_to_bf16(whole[i])) << i;
  const RandomTensor other{"w2", t.shape, Spread::linear};  // another name, another stream
  fill_random(other, seed, 0, t.numel(), DType::F32, reinterpret_cast<uint8_t*>(part.data()));
  EXPECT_FALSE(whole == part);
}

// P(|T| > t) for Student-t with 4 degrees of freedom (closed form of its CDF).
double t4_two_sided_tail(double t) {
  const double x = t / std::sqrt(1 + t * t / 4), cdf = 0.5 + 0.375 * x * (1 - t * t / (12 * (1 + t * t / 4)));
  return 2 * (1 - cdf);
}

struct Moments {
  double mean = 0, sd = 0;
  int64_t beyond = 0;  // |x - center| > threshold
};
Moments moments(Spread spread, uint64_t seed, int64_t n, double center, double threshold) {
  const RandomTensor t{"stats", {n}, spread};
  std::vector<float> v(static_cast<size_t>(n));
  fill_random(t, seed, 0, n, DType::F32, reinterpret_cast<uint8_t*>(v.data()));
  Moments m;
  double s = 0, s2 = 0;
  for (float x : v) {
    s += x, s2 += double(x) * x;
    m.beyond += std::fabs(x - center) > threshold;
  }
  m.mean = s / double(n);
  m.sd = std::sqrt(s2 / double(n) - m.mean * m.mean);
  return m;
}

TEST(InitRandom, SpreadMatchesTheDocumentedDistributions) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t n = int64_t(1) << 22;
  const double p = 1.0 / 1024;
  // linear: N(0, 0.02) mixed with 1/1024 of 0.04 * t4 (variance 2): sd = 0.02 sqrt(1 + 7p)
  const Moments lin = moments(Spread::linear, seed, n, 0.0, 0.12);
  EXPECT_NEAR(lin.mean, 0.0, 5 * 0.02 / std::sqrt(double(n)));
  EXPECT_NEAR(lin.sd, 0.02 * std::sqrt(1 + 7 * p), 0.02 * 0.02);
  const double expect_out = double(n) * p * t4_two_sided_tail(0.12 / 0.04);  // normal part: ~1e-9
  EXPECT_NEAR(double(lin.beyond), expect_out, 5 * std::sqrt(expect_out) + 1) << "outliers beyond 6 sigma";
  const Moments norm = moments(Spread::norm, seed, n, 1.0, 0.3);
  EXPECT_NEAR(norm.mean, 1.0, 5 * 0.05 / std::sqrt(double(n)));
  EXPECT_NEAR(norm.sd, 0.05, 0.05 * 0.005);
  EXPECT_EQ(norm.beyond, 0);
  const Moments emb = moments(Spread::embedding, seed, n, 0.0, 0.12);
  EXPECT_NEAR(emb.sd, 0.02, 0.02 * 0.005);
  EXPECT_EQ(emb.beyond, 0);
}

TEST(InitRandom, BadArgumentsAreClearErrors) {
  TempDir dir;
  InitRandomOptions opt;
  expect_error_mentions([&] { init_random("llama-4", dir.path / "x", opt); }, "llama-4");
  expect_error_mentions([] { random_weight_dtype("int8"); }, "int8");
  std::ofstream(dir.path / "occupied") << "x";
  expect_error_mentions([&] { init_random("tiny", dir.path, opt); }, "not empty");
  expect_error_mentions([&] { init_random("tiny", dir.path / "occupied", opt); }, "not a directory");
  nlohmann::json bad = random_arch_config("tiny");
  bad["num_attention_heads"] = 3;
  expect_error_mentions([&] { write_random_model(bad, dir.path / "y", opt); }, "num_key_value_heads");
  EXPECT_FALSE(fs::exists(dir.path / "y"));  // nothing written for a bad config
  opt.layers = -1;
  expect_error_mentions([&] { init_random("tiny", dir.path / "z", opt); }, "--layers");
  opt.layers = 0;
  opt.dtype = DType::I8;
  expect_error_mentions([&] { init_random("tiny", dir.path / "z", opt); }, "I8");
  opt.dtype = DType::BF16;
  const char* old = std::getenv("NIBBLE_DATA");
  const std::string saved = old ? old : "";
  setenv("NIBBLE_DATA", dir.path.c_str(), 1);
  expect_error_mentions([&] { init_random("tiny", dir.path / "z", opt); }, "tokenizer.json");
  if (old) setenv("NIBBLE_DATA", saved.c_str(), 1);
  else unsetenv("NIBBLE_DATA");
}

TEST(InitRandom, LayersOverride) {
  TempDir dir;
  InitRandomOptions opt;
  opt.layers = 3;
  opt.dtype = DType::F16;
  init_random("tiny", dir.path, opt);
  const ModelConfig c = ModelConfig::load(dir.path);
  EXPECT_EQ(c.num_layers, 3);
  EXPECT_EQ(c.dtype, "float16");
  const TensorStore store = TensorStore::open_dir(dir.path);
  EXPECT_EQ(store.at("model.layers.2.mlp.down_proj.weight").dtype, DType::F16);
  EXPECT_EQ(store.find("model.layers.3.mlp.down_proj.weight"), nullptr);
}

}  // namespace
}  // namespace nibble

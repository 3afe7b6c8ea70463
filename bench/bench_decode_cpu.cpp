// CPU decode speed per weight format, and how close the quantized GEMV gets to memory bandwidth.
// Three families of benchmarks, measured in one run:
//   StreamRead/threads:T/MiB:S  sum over an S MiB float buffer: streaming-read bandwidth
//   Gemv/FORMAT           linear_cpu with M = 1 over an [8192 x 4096] matrix in FORMAT;
//                         bytes_per_second = packed weight bytes / time
//   Decode/FORMAT         one token of house-49m decode (Session::forward of 1 token at positions
//                         16..271) with every linear layer and the (tied) output layer in FORMAT;
//                         items_per_second = tokens/s, bytes_per_second = weight bytes streamed
//                         per token (all weights but the embedding rows not looked up) x tokens/s
//   Sample/KIND           one sampling step over 49,152 random logits (greedy, T + top-p, ReSET)
// Formats: every registered weight format (not the *-act ones), or NIBBLE_BENCH_FORMATS=a,b,c.
// Model: $NIBBLE_DATA/models/house-49m, or NIBBLE_BENCH_MODEL=DIR.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../src/model/weights.h"  // per-tensor byte counts of a loaded model
#include "nibble/format.h"
#include "nibble/linear.h"
#include "nibble/model.h"
#include "nibble/paths.h"
#include "nibble/sampler.h"

namespace {

// ---- streaming read ----

float sum_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  for (; i < n; ++i) total += p[i];
  return total;
}

void BM_StreamRead(benchmark::State& st) {
  const int threads = int(st.range(0));
  const size_t n = size_t(st.range(1)) << 20 >> 2;  // range(1) MiB of floats
  static std::vector<float> buf;
  if (buf.size() < n) buf.assign(n, 1.0f);
  for (auto _ : st) {
    float total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (int t = 0; t < threads; ++t) {
      size_t lo = n * size_t(t) / size_t(threads), hi = n * size_t(t + 1) / size_t(threads);
      total += sum_avx2(buf.data() + lo, hi - lo);
    }
    benchmark::DoNotOptimize(total);
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(n * sizeof(float)));
}

// ---- GEMV ----

std::vector<float> random_normal(size_t n, float sd, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Google Benchmark calls a benchmark function several times while it sizes the run: keep the
// last format's prepared object instead of quantizing / loading again each time.
template <class T>
struct LastOne {
  std::string key;
  std::unique_ptr<T> value;
  template <class Make>
  T& get(const std::string& k, Make make) {
    if (!value || key != k) {
      value.reset();
      value = make();
      key = k;
    }
    return *value;
  }
};

void BM_Gemv(benchmark::State& st, std::string format) {
  constexpr int64_t N = 8192, K = 4096;
  static LastOne<nibble::PackedTensor> cache;
  const nibble::PackedTensor* wp = nullptr;
  try {
    wp = &cache.get(format, [&] {
      const auto src = random_normal(size_t(N * K), 0.02f, 1);
      return std::make_unique<nibble::PackedTensor>(nibble::quantize(format, src.data(), N, K));
    });
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  const nibble::PackedTensor& w = *wp;
  const auto x = random_normal(size_t(K), 1.0f, 2);
  std::vector<float> y(static_cast<size_t>(N));
  for (auto _ : st) {
    nibble::linear_cpu(x.data(), 1, w, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(w.bytes()));
  st.counters["weight_MB"] = double(w.bytes()) / 1e6;
}

// ---- decode ----

size_t streamed_bytes_per_token(const nibble::Model& m) {
  const nibble::ModelWeights& w = m.weights();
  // untied: the embedding table is only looked up (one row per token), not streamed
  return m.weight_bytes() - (w.lm_head ? w.embed.bytes() : 0);
}

void BM_Decode(benchmark::State& st, std::string format, std::filesystem::path dir) {
  nibble::LoadOptions lo;
  lo.weight_format = format;
  lo.quantize_lm_head = true;
  static LastOne<nibble::Model> cache;
  nibble::Model* model = nullptr;
  try {
    model = &cache.get(format, [&] { return nibble::Model::load(dir, lo); });
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  constexpr int kPrompt = 16, kSteps = 256;
  nibble::Session s(*model, kPrompt + kSteps + 1);
  const int32_t vocab = model->config().vocab_size;
  std::vector<int32_t> prompt(kPrompt);
  for (int i = 0; i < kPrompt; ++i) prompt[size_t(i)] = (1000 + 37 * i) % vocab;
  s.forward(prompt);
  int32_t tok = 1234 % vocab;
  for (auto _ : st) {
    if (s.position() >= kPrompt + kSteps) {
      st.PauseTiming();
      s.reset();
      s.forward(prompt);
      st.ResumeTiming();
    }
    auto logits = s.forward(std::span<const int32_t>(&tok, 1));
    benchmark::DoNotOptimize(logits.data());
    tok = (tok + 7919) % vocab;
  }
  const size_t bytes = streamed_bytes_per_token(*model);
  st.SetItemsProcessed(int64_t(st.iterations()));
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(bytes));
  st.counters["weight_MB"] = double(bytes) / 1e6;
}

// ---- sampling (per-token cost next to a decode step) ----

void BM_Sample(benchmark::State& st, nibble::SamplerKind kind) {
  const int64_t vocab = 49152;  // house-49m's
  const auto z = random_normal(size_t(vocab), 3.0f, 3);
  nibble::SamplerConfig cfg;
  cfg.kind = kind;
  cfg.temperature = 0.8;
  cfg.top_p = 0.95;
  nibble::Sampler s(cfg, [](int32_t id) { return id % 97 == 0 ? std::string("\n") : std::string("w"); });
  for (auto _ : st) benchmark::DoNotOptimize(s.sample(z.data(), vocab));
  st.SetItemsProcessed(int64_t(st.iterations()));
}

std::vector<std::string> bench_formats() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("NIBBLE_BENCH_FORMATS"); env && *env) {
    std::stringstream ss(env);
    for (std::string f; std::getline(ss, f, ',');)
      if (!f.empty()) out.push_back(f);
    return out;
  }
  for (const auto& f : nibble::all_formats())
    if (!std::string_view(f.name).ends_with("-act")) out.emplace_back(f.name);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const int max_threads = omp_get_max_threads();
  // 128 MiB: about the house model's size; 1 GiB: beyond any cache, DRAM bandwidth
  auto* stream = benchmark::RegisterBenchmark("StreamRead", BM_StreamRead);
  for (int mib : {128, 1024}) {
    stream->Args({1, mib});
    if (max_threads > 1) stream->Args({max_threads, mib});
  }
  stream->ArgNames({"threads", "MiB"})->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Sample/greedy", BM_Sample, nibble::SamplerKind::Greedy)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("Sample/temp0.8-top_p0.95", BM_Sample, nibble::SamplerKind::Default)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("Sample/reset", BM_Sample, nibble::SamplerKind::Reset)
      ->Unit(benchmark::kMicrosecond);
  std::filesystem::path dir = nibble::data_dir() / "models" / "house-49m";
  if (const char* env = std::getenv("NIBBLE_BENCH_MODEL"); env && *env) dir = env;
  const auto formats = bench_formats();
  for (const auto& f : formats)
    benchmark::RegisterBenchmark(std::string("Gemv/").append(f).c_str(), BM_Gemv, f)
        ->UseRealTime()->Unit(benchmark::kMicrosecond);
  for (const auto& f : formats)
    benchmark::RegisterBenchmark(std::string("Decode/").append(f).c_str(), BM_Decode, f, dir)
        ->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

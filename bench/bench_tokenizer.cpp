// Encode / decode speed of each tokenizer on the whole WikiText-2 test file (the perplexity text).
#include <benchmark/benchmark.h>

#include <fstream>
#include <iterator>

#include "nibble/paths.h"
#include "nibble/tokenizer.h"

namespace {

const std::string& wikitext() {
  static const std::string text = [] {
    std::ifstream in(nibble::data_dir() / "text" / "wikitext-2-raw" / "wiki.test.gptq_join.txt",
                     std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }();
  return text;
}

std::filesystem::path model(const char* rel) { return nibble::data_dir() / "models" / rel; }

void encode(benchmark::State& state, const nibble::Tokenizer& tok) {
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok.encode(wikitext());
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(wikitext().size()));
  state.counters["tokens"] = double(n);
}

void decode(benchmark::State& state, const nibble::Tokenizer& tok) {
  const auto ids = tok.encode(wikitext());
  for (auto _ : state) benchmark::DoNotOptimize(tok.decode(ids).size());
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(wikitext().size()));
}

void BM_EncodeHfSmolLM2(benchmark::State& s) {
  static const auto t = nibble::load_hf_tokenizer(model("smollm2-135m-instruct-tokenizer/tokenizer.json"));
  encode(s, *t);
}
void BM_EncodeSentencePieceLlama2(benchmark::State& s) {
  static const auto t = nibble::load_sentencepiece(model("llama2-sentencepiece-tokenizer/tokenizer.model"));
  encode(s, *t);
}
void BM_EncodeLlama2cLlama2(benchmark::State& s) {
  static const auto t = nibble::load_llama2c_tokenizer(model("llama2-sentencepiece-tokenizer/tokenizer.bin"), 32000);
  encode(s, *t);
}
void BM_DecodeHfSmolLM2(benchmark::State& s) {
  static const auto t = nibble::load_hf_tokenizer(model("smollm2-135m-instruct-tokenizer/tokenizer.json"));
  decode(s, *t);
}
void BM_LoadHfSmolLM2(benchmark::State& s) {
  for (auto _ : s)
    benchmark::DoNotOptimize(nibble::load_hf_tokenizer(model("smollm2-135m-instruct-tokenizer/tokenizer.json")));
}

}  // namespace

BENCHMARK(BM_EncodeHfSmolLM2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeSentencePieceLlama2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeLlama2cLlama2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeHfSmolLM2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadHfSmolLM2)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();

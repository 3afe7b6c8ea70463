// Quantize / dequantize throughput of every registered format on one core (OpenMP threads = 1),
// on a 4096 x 14336 gaussian matrix (an 8B model's MLP weight). items/s = weights/s.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <random>
#include <vector>

#include "nibble/format.h"

namespace {

constexpr int64_t kRows = 4096, kCols = 14336;

const std::vector<float>& weights() {
  static const std::vector<float> w = [] {
    std::vector<float> v(size_t(kRows * kCols));
    std::mt19937 rng(1234);
    std::normal_distribution<float> n(0.0f, 0.02f);
    for (float& x : v) x = n(rng);
    return v;
  }();
  return w;
}

void quantize(benchmark::State& state, const nibble::FormatInfo* f) {
  const std::vector<float>& w = weights();
  for (auto _ : state) {
    nibble::PackedTensor t = f->quantize(w.data(), kRows, kCols, {});
    benchmark::DoNotOptimize(t.qweight.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}

// Row by row, as the CPU GEMV calls it, into a one-row buffer.
void dequantize(benchmark::State& state, const nibble::FormatInfo* f) {
  nibble::PackedTensor t = f->quantize(weights().data(), kRows, kCols, {});
  std::vector<float> row(static_cast<size_t>(kCols));
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      f->dequantize_rows(t, r, 1, row.data());
      benchmark::DoNotOptimize(row.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}

}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(1);
  for (const nibble::FormatInfo& f : nibble::all_formats()) {
    std::string name(f.name);
    benchmark::RegisterBenchmark(("quantize/" + name).c_str(), quantize, &f)
        ->Unit(benchmark::kMillisecond)->MinTime(1.0);
    benchmark::RegisterBenchmark(("dequantize/" + name).c_str(), dequantize, &f)
        ->Unit(benchmark::kMillisecond)->MinTime(1.0);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// The GEMV / GEMM / dequant+cuBLAS crossover table: lookup, JSON, and the measurement behind it.
#include "nibble/cuda/crossover.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "env_table.h"
#include "nibble/cuda/bench.h"
#include "nibble/cuda/cublas_fp16.h"
#include "nibble/cuda/gemm.h"
#include "nibble/cuda/linear.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

std::vector<CrossoverEntry> parse_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("crossover table '{}': cannot open", path));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) throw Error(fmt::format("crossover table '{}': not a JSON array", path));
  std::vector<CrossoverEntry> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    auto field = [&](const char* k) -> const nlohmann::json& {
      if (!e.is_object() || !e.contains(k)) throw Error(fmt::format("crossover table '{}': entry {} has no \"{}\"", path, i, k));
      return e[k];
    };
    CrossoverEntry c;
    if (!field("format").is_string() || !field("K").is_number_integer() || !field("N").is_number_integer() ||
        !field("gemm_from_m").is_number_integer() || !field("dequant_from_m").is_number_integer())
      throw Error(fmt::format("crossover table '{}': entry {} has a field of the wrong type", path, i));
    c.format = e["format"].get<std::string>();
    c.K = e["K"].get<int64_t>(), c.N = e["N"].get<int64_t>();
    c.c.gemm_from_m = e["gemm_from_m"].get<int>(), c.c.dequant_from_m = e["dequant_from_m"].get<int>();
    if (c.c.gemm_from_m < 1 || c.c.dequant_from_m < 1)
      throw Error(fmt::format("crossover table '{}': entry {}: gemm_from_m and dequant_from_m must be >= 1", path, i));
    out.push_back(std::move(c));
  }
  return out;
}

// Median microseconds of launch() (CUDA-graph replay, one weight copy: not rotated, so a shape
// whose packed weight fits the 50 MB L2 is timed partly from L2, by every path alike for the codes;
// the dequant path's fp16 copy is larger and mostly is not. Good enough to place a switch point;
// `nibble bench gemm` is the rotated measurement.)
double time_us(const std::function<void(cudaStream_t)>& launch, cudaStream_t stream) {
  return time_rotated_us([&](int, cudaStream_t s) { launch(s); }, 1, stream, 8, 5);
}

}  // namespace

static detail::EnvTable<CrossoverEntry>& table() {
  static detail::EnvTable<CrossoverEntry> t("NIBBLE_CUDA_CROSSOVER", parse_table);
  return t;
}

Crossover crossover_for(std::string_view format, int64_t K, int64_t N) {
  const auto same_shape = [&](const CrossoverEntry& e) { return e.format == format && e.K == K && e.N == N; };
  if (const auto e = table().find(same_shape)) return e->c;
  Crossover c;
  if (format.starts_with("nestedfp")) c.dequant_from_m = 1 << 30;  // no dequantize path
  return c;
}

void set_crossover_table(std::vector<CrossoverEntry> entries) { table().set(std::move(entries)); }

void load_crossover_table(const std::string& path) { set_crossover_table(parse_table(path)); }

void save_crossover_table(const std::string& path, const std::vector<CrossoverEntry>& entries) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& e : entries)
    j.push_back({{"format", e.format}, {"K", e.K}, {"N", e.N}, {"gemm_from_m", e.c.gemm_from_m},
                 {"dequant_from_m", e.c.dequant_from_m}});
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("crossover table '{}': cannot write", path));
  out << j.dump(1) << "\n";
}

CrossoverEntry measure_crossover(std::string_view format, int64_t K, int64_t N, cudaStream_t stream) {
  if (!has_kernel(format) || !has_gemm_kernel(format))
    throw Error(fmt::format("measure_crossover: '{}' needs both a GEMV and a GEMM kernel", format));
  const PackedTensor t = random_packed(format, N, K, 99);
  const DeviceWeight gv = upload(t, "crossover");
  const GemmWeight gm = upload_gemm(t, "crossover");
  constexpr int kMaxM = 2048;
  DeviceArray<uint16_t> x(size_t(kMaxM) * K), y(size_t(kMaxM) * N), w16(size_t(N) * K);
  NIBBLE_CUDA_CHECK(cudaMemsetAsync(x.p, 0, size_t(kMaxM) * K * 2, stream));  // zeros: the time does not depend on values
  GemmWorkspace ws;
  CublasFp16 blas;
  auto gemv = [&](int M, cudaStream_t s) {
    for (int m0 = 0; m0 < M; m0 += 16) linear(x.p + size_t(m0) * K, std::min(16, M - m0), gv, y.p + size_t(m0) * N, s);
  };
  auto fused = [&](int M, cudaStream_t s) { gemm(x.p, M, gm, y.p, ws, s); };
  auto dequant = [&](int M, cudaStream_t s) {
    dequantize_fp16(gm, w16.p, s);
    blas.gemm(x.p, w16.p, y.p, M, int(N), int(K), s);
  };
  // Each switch happens just past the last measured M where the smaller-M path still won.
  CrossoverEntry e{std::string(format), K, N, {}};
  int prev = 16;
  e.c.gemm_from_m = 257;  // never measured to win: GEMV chunks up to 256 rows
  for (int M : {32, 64, 128, 256}) {
    if (time_us([&](cudaStream_t s) { fused(M, s); }, stream) < time_us([&](cudaStream_t s) { gemv(M, s); }, stream)) {
      e.c.gemm_from_m = prev + 1;
      break;
    }
    prev = M;
  }
  prev = 32;
  e.c.dequant_from_m = 1 << 30;
  for (int M : {64, 128, 256, 512, 1024, 2048}) {
    if (time_us([&](cudaStream_t s) { dequant(M, s); }, stream) < time_us([&](cudaStream_t s) { fused(M, s); }, stream)) {
      e.c.dequant_from_m = prev + 1;
      break;
    }
    prev = M;
  }
  return e;
}

}  // namespace nibble::cuda

#include "nibble/cuda/tuning.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "env_table.h"
#include "gemv_args.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

std::vector<TuningEntry> parse_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("tuning table '{}': cannot open", path));
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw Error(fmt::format("tuning table '{}': not JSON: {}", path, e.what()));
  }
  if (!j.is_array()) throw Error(fmt::format("tuning table '{}': top level must be a list", path));
  std::vector<TuningEntry> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    auto need = [&](const char* field) -> const nlohmann::json& {
      if (!e.is_object() || !e.contains(field))
        throw Error(fmt::format("tuning table '{}': entry {} has no field '{}'", path, i, field));
      return e[field];
    };
    try {
      TuningEntry t;
      t.format = need("format").get<std::string>();
      t.K = need("K").get<int64_t>(), t.N = need("N").get<int64_t>(), t.M = need("M").get<int>();
      t.choice.rows_per_warp = need("rows_per_warp").get<int>();
      const std::string dec = need("fp4_decode").get<std::string>();
      const std::string eng = need("engine").get<std::string>();
      if (eng == "cuda_cores") t.choice.engine = Engine::cuda_cores;
      else if (eng == "tensor_cores") t.choice.engine = Engine::tensor_cores;
      else if (eng == "tensor_stream") t.choice.engine = Engine::tensor_stream;
      else
        throw Error(fmt::format(
            "tuning table '{}': entry {} field engine '{}' (cuda_cores, tensor_cores or tensor_stream)", path, i, eng));
      if (t.choice.rows_per_warp != 2 && t.choice.rows_per_warp != 4)
        throw Error(fmt::format("tuning table '{}': entry {} field rows_per_warp must be 2 or 4", path, i));
      if (e.contains("k_splits")) t.choice.k_splits = e["k_splits"].get<int>();
      if (!valid_k_splits(t.choice.k_splits))
        throw Error(fmt::format("tuning table '{}': entry {} field k_splits must be 1, 2, 4 or 8", path, i));
      const TunedChoice h = default_choice(t.format, t.K, t.N, t.M);
      t.choice.row_blocks = e.contains("row_blocks") ? e["row_blocks"].get<int>() : h.row_blocks;
      if (!valid_row_blocks(t.choice.row_blocks))
        throw Error(fmt::format("tuning table '{}': entry {} field row_blocks must be 1, 2 or 4", path, i));
      if (dec == "bits") t.choice.fp4_decode = Fp4Decode::bits;
      else if (dec == "lut") t.choice.fp4_decode = Fp4Decode::lut;
      else throw Error(fmt::format("tuning table '{}': entry {} field fp4_decode '{}' (bits or lut)", path, i, dec));
      out.push_back(std::move(t));
    } catch (const nlohmann::json::exception& ex) {
      throw Error(fmt::format("tuning table '{}': entry {}: {}", path, i, ex.what()));
    }
  }
  return out;
}

}  // namespace

std::string_view engine_name(Engine e) {
  switch (e) {
    case Engine::cuda_cores: return "cuda_cores";
    case Engine::tensor_cores: return "tensor_cores";
    case Engine::tensor_stream: return "tensor_stream";
    default: return "auto";
  }
}

std::string_view fp4_decode_name(Fp4Decode d) {
  switch (d) {
    case Fp4Decode::bits: return "bits";
    case Fp4Decode::lut: return "lut";
    default: return "auto";
  }
}

int heuristic_sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && v > 0)
      return v;
    (void)cudaGetLastError();
    return 132;  // H100 SXM
  }();
  return n;
}

namespace {
constexpr int kDefaultRowsPerWarp = 2;  // CUDA cores, the heuristic's rows per warp

// The tensor-core GEMV's CTAs at one K split (row_blocks 16-row blocks each) and the CTA slots the
// SMs hold for it at once.
struct TcGrid {
  int64_t ctas, slots;
};
TcGrid tc_grid(int64_t N, int M, int row_blocks) {
  return {(N + 16 * row_blocks - 1) / (16 * row_blocks),
          int64_t(heuristic_sm_count()) * detail::mma_ctas_per_sm(M > 8 ? 2 : 1, row_blocks)};
}

// The share of those slots (at most all) that the grid fills with the heuristic's K splits.
double tc_slot_fill(std::string_view format, int64_t K, int64_t N, int M, int row_blocks) {
  const TcGrid g = tc_grid(N, M, row_blocks);
  const int ks = default_k_splits(Engine::tensor_cores, format, K, N, M, row_blocks);
  return std::min(1.0, double(g.ctas * ks) / double(g.slots));
}
}  // namespace

// The rule the H100 tuning table follows (docs/perf/kernels-tuning-h100.json: 52 of its 64 M = 1
// entries take 2 rows per warp): 2 rows per warp, and the fewest K splits that give about two CTAs
// per SM and at most 8192 elements of a row per warp group (long rows: down projections).
// NF4 takes the tensor cores from one row on: its CUDA-core GEMV looks each weight up in a
// shared-memory table, and its tensor-core one (levels by byte permutes) measured 1.12-1.22x faster
// at one row on the four Llama-3.1-8B shapes (H100, docs/perf/fp4-g128-bits-2026-11-27.md).
//
// INT4-g128's long rows (down projections, K >= 8192) take the tensor cores at one row too: the
// 2-CTA cluster against the CUDA-core split (H200, 8-layer Llama-3.1-8B shape, batch 1, two
// passes: 1342 / 1338 -> 1379 / 1382 tokens/s; alone 11.4 against 12.6 us; the same switch made
// mxfp4 and nvfp4 1-2% slower and fp4-g128 level, docs/perf/int4-down-tc-2026-12-01.md).
TunedChoice default_choice(std::string_view format, int64_t K, int64_t N, int M) {
  TunedChoice c;
  const bool tensor_rows = M >= 2 || format == "nf4" || (format == "int4-g128" && K >= 8192);
  c.engine = tensor_rows && format != "razer-fp3-g128" && K % 64 == 0 ? Engine::tensor_cores : Engine::cuda_cores;
  c.fp4_decode = Fp4Decode::bits;
  c.rows_per_warp = kDefaultRowsPerWarp;
  // Tensor cores: one row block per CTA up to 4 tokens, then two (one B fragment of X serves
  // both), as the H100 sweep found best on most shapes (docs/perf/tune-2026-11-23.md); long rows
  // (down projections) take two blocks split over a cluster at any M (docs/perf/gemv-cluster-2026-11-23.md).
  c.row_blocks = M <= 4 && K < 8192 ? 1 : 2;
  // At 9-16 tokens (two token tiles), one block where two would leave more of the SMs' CTA slots
  // empty (q/k/v of Llama-3.1-8B: 192 CTAs of 2 blocks for 264 slots), and for fp4-g128 and nvfp4
  // wherever one block fills them too (gate/up alone at 16 tokens: fp4-g128 28.4 against 35.2 us,
  // nvfp4 31.5 / 31.8). H200, `nibble tune --m 16` on the four Llama-3.1-8B shapes picked exactly
  // these for every tile format (but nf4's o: 1 K split); its tables end to end, 8-layer model,
  // batch 16, two passes: fp4-g128 +5.9%, razer-fp4-g128 +1.7%, nvfp4 +1.5%, mxfp4 +1.4%,
  // nvfp4-razer +0.9%, nf4 +0.5%, int4-g128 -0.5% (docs/perf/int4-down-tc-2026-12-01.md).
  if (c.engine == Engine::tensor_cores && M > 8 && K < 8192) {
    const double one = tc_slot_fill(format, K, N, M, 1), two = tc_slot_fill(format, K, N, M, 2);
    if (one > two || (one == two && (format == "fp4-g128" || format == "nvfp4"))) c.row_blocks = 1;
  }
  c.k_splits = default_k_splits(c.engine, format, K, N, M, c.row_blocks);
  // NVFP4 at one row where 2-row CTAs would not all be resident (gate/up): the plain grid of 4 rows
  // per warp, not the persistent kernel (H200, 8-layer Llama-3.1-8B shape, batch 1, two passes,
  // two calls: 1228 / 1229 -> 1256 / 1257 and 1231 / 1233 -> 1259 / 1262 tokens/s; gate/up alone
  // 26.3 -> 23.4 us; docs/perf/fused-norm-2026-11-29.md).
  if (M == 1 && format == "nvfp4" && c.engine == Engine::cuda_cores && c.k_splits == 1 &&
      N > int64_t(64) * heuristic_sm_count())
    c.rows_per_warp = 4;
  return c;
}

int default_k_splits(Engine engine, std::string_view format, int64_t K, int64_t N, int M, int row_blocks) {
  if (engine == Engine::tensor_stream) return 1;
  if (engine == Engine::tensor_cores) {
    // clusters of CTAs on one row group, doubling while the grid still fits the SMs' CTA slots at
    // once and each CTA keeps at least 2048 elements of a row
    const TcGrid g = tc_grid(N, M, row_blocks);
    int ks = 1;
    while (ks < 4 && g.ctas * ks * 2 <= g.slots && K >= 2048 * ks * 2) ks *= 2;
    return ks;
  }
  // CUDA cores: a warp step covers 2048 elements of a row (32 lanes x 2 chunks of 32; FP3: 32 x 128;
  // FP16: 32 x 2 chunks of 8)
  const int64_t step = format == "razer-fp3-g128" ? 4096 : format == "fp16" ? 512 : 2048;
  const int64_t want_ctas = 15 * int64_t(heuristic_sm_count()) / 8;
  int splits = 1;
  for (int ks : {1, 2, 4, 8}) {
    if (ks > 1 && K < step * ks) break;
    splits = ks;
    const int64_t rows_per_cta = 8 / ks * kDefaultRowsPerWarp;
    if ((N + rows_per_cta - 1) / rows_per_cta >= want_ctas && K / ks <= 8192) break;
  }
  return splits;  // small N or very long rows: the most splits K allows
}

static detail::EnvTable<TuningEntry>& table() {
  static detail::EnvTable<TuningEntry> t("NIBBLE_CUDA_TUNING", parse_table);
  return t;
}

TunedChoice tuned_choice(std::string_view format, int64_t K, int64_t N, int M) {
  const auto same_case = [&](const TuningEntry& e) { return e.format == format && e.K == K && e.N == N && e.M == M; };
  if (const auto e = table().find(same_case)) return e->choice;
  return default_choice(format, K, N, M);
}

void set_tuning_table(std::vector<TuningEntry> entries) { table().set(std::move(entries)); }

void load_tuning_table(const std::string& path) { set_tuning_table(parse_table(path)); }

void save_tuning_table(const std::string& path, const std::vector<TuningEntry>& entries) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& e : entries)
    j.push_back({{"format", e.format}, {"K", e.K}, {"N", e.N}, {"M", e.M}, {"engine", engine_name(e.choice.engine)},
                 {"rows_per_warp", e.choice.rows_per_warp}, {"fp4_decode", fp4_decode_name(e.choice.fp4_decode)},
                 {"k_splits", e.choice.k_splits}, {"row_blocks", e.choice.row_blocks}});
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("tuning table '{}': cannot write", path));
  out << j.dump(1) << "\n";
}

}  // namespace nibble::cuda

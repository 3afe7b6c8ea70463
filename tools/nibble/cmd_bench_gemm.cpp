// `nibble bench gemm`: the tensor-core GEMMs (NestedFP FP16 / FP8 modes, W4A16) on the projection
// shapes of Llama-3.1-8B and Qwen3-32B, M in {1, 16, ..., 2048}, against cuBLAS FP16 and cuBLASLt
// FP8 measured in the same run. CUDA-graph replay timing (bench.h), weights rotated over several
// copies when they would fit the L2. Writes JSON rows and a Markdown table.
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"

#ifdef NIBBLE_HAVE_CUDA
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>
#include <tuple>
#include <nlohmann/json.hpp>

#include "nibble/cuda/bench.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/cublas_fp16.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/half.h"

namespace {

using namespace nibble;
using namespace nibble::cuda;

using Shape = BenchShape;

struct Options {
  std::string json, md, shapes = "all";
  std::vector<std::string> formats{"nestedfp", "nestedfp8", "nvfp4", "razer-fp4-g128"};
  std::vector<int> ms{1, 16, 32, 64, 128, 256, 512, 1024, 2048};
  double target_ms = 3.0;  // graph length per timed replay
};

struct Row {
  std::string format, path, model, proj;  // path: "fused" (the GEMM kernel), "dequant+cublas", "quantizer", or the baseline
  int K = 0, N = 0, M = 0;
  double us = 0, fp16_us = 0;
};

// Fast host random numbers (weights only need plausible values, not quality randomness).
struct XorShift {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  }
  float normalish() {  // sum of four uniforms: mean 0, sd about 0.58
    float a = 0;
    for (int i = 0; i < 4; ++i) a += float(next() >> 40) / float(1 << 24) - 0.5f;
    return a;
  }
};

std::vector<uint16_t> random_halves(size_t n, uint64_t seed, float sd) {
  XorShift r{seed | 1};
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = float_to_half(r.normalish() * sd * 1.7f);
  return v;
}

// Median microseconds per launch; graph length chosen from a first rough timing.
double time_us(const std::function<void(int, cudaStream_t)>& launch, int copies, cudaStream_t stream,
               double target_ms) {
  for (int i = 0; i < 2; ++i) launch(i % copies, stream);  // warm-up, workspace growth, heuristics
  cudaEvent_t a, b;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&a));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&b));
  NIBBLE_CUDA_CHECK(cudaEventRecord(a, stream));
  for (int i = 0; i < 3; ++i) launch(i % copies, stream);
  NIBBLE_CUDA_CHECK(cudaEventRecord(b, stream));
  NIBBLE_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a), cudaEventDestroy(b);
  const double one = std::max(1e-3, ms / 3.0);
  const int launches = std::clamp(int(target_ms / one), 2, 48);
  return time_rotated_us(launch, copies, stream, launches, 5);
}

// A weight buffer with `copies` identical copies (rotated against the L2).
template <class T>
struct Rotated {
  std::unique_ptr<DeviceArray<T>> buf;
  size_t n = 0;
  int copies = 1;
  Rotated(const std::vector<T>& host) : n(host.size()), copies(rotation_copies(host.size() * sizeof(T))) {
    buf = std::make_unique<DeviceArray<T>>(n * copies);
    for (int c = 0; c < copies; ++c)
      NIBBLE_CUDA_CHECK(cudaMemcpy(buf->p + n * c, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  T* at(int c) const { return buf->p + n * size_t(c); }
};

// One upload (the repack is host work), then device-side clones for the rotation.
std::vector<GemmWeight> upload_copies(const PackedTensor& t) {
  std::vector<GemmWeight> v;
  v.push_back(upload_gemm(t, t.format));
  const int copies = rotation_copies(v[0].bytes());
  while (int(v.size()) < copies) {
    const GemmWeight& a = v[0];
    GemmWeight b;
    b.format = a.format, b.N = a.N, b.K = a.K, b.block = a.block, b.global_scale = a.global_scale;
    for (auto [dst, src, n] : {std::tuple{&b.codes, a.codes, a.codes_bytes}, std::tuple{&b.meta, a.meta, a.meta_bytes}}) {
      if (!src) continue;
      NIBBLE_CUDA_CHECK(cudaMalloc(dst, n));
      NIBBLE_CUDA_CHECK(cudaMemcpy(*dst, src, n, cudaMemcpyDeviceToDevice));
    }
    b.codes_bytes = a.codes_bytes, b.meta_bytes = a.meta_bytes;
    v.push_back(std::move(b));
  }
  return v;
}

void bench_shape(const Shape& s, const Options& o, cudaStream_t stream, CublasFp16& blas, CublasLtFp8& lt,
                 std::vector<Row>& rows) {
  const int maxM = *std::max_element(o.ms.begin(), o.ms.end());
  DeviceArray<uint16_t> x(size_t(maxM) * s.K), y(size_t(maxM) * s.N);
  DeviceArray<uint8_t> x8(size_t(maxM) * s.K);
  DeviceArray<float> row_scale(maxM);
  {
    const auto hx = random_halves(size_t(maxM) * s.K, 7, 1.0f);
    NIBBLE_CUDA_CHECK(cudaMemcpy(x.p, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    quantize_rows_e4m3(x.p, maxM, s.K, x8.p, row_scale.p, stream);
  }
  // FP16 weights small enough for NestedFP (|w| < 1.875), their planes, and the upper plane as FP8.
  const auto hw = random_halves(size_t(s.N) * s.K, 11, 0.02f);
  std::vector<float> hw_f(hw.size());
  for (size_t i = 0; i < hw.size(); ++i) hw_f[i] = half_to_float(hw[i]);
  PackedTensor nested = quantize("nestedfp", hw_f.data(), s.N, s.K);  // fp16 values: split exactly
  std::map<int, double> fp16_us;
  GemmWorkspace ws;
  auto add = [&](const std::string& f, const std::string& path, int M, double us) {
    if (f == "fp16-cublas") fp16_us[M] = us;
    rows.push_back({f, path, s.model, s.proj, s.K, s.N, M, us, path == "quantizer" ? 0.0 : fp16_us[M]});
    std::fprintf(stderr, "  %-16s %-15s M=%-5d %9.1f us\n", f.c_str(), path.c_str(), M, us);
  };
  {
    Rotated<uint16_t> w(hw);
    for (int M : o.ms)
      add("fp16-cublas", "cublas", M, time_us([&](int c, cudaStream_t st) { blas.gemm(x.p, w.at(c), y.p, M, s.N, s.K, st); },
                                    w.copies, stream, o.target_ms));
  }
  {
    Rotated<uint8_t> w8(nested.qweight);
    for (int M : o.ms)
      add("fp8-cublaslt", "cublaslt", M,
          time_us([&](int c, cudaStream_t st) { lt.gemm(x8.p, w8.at(c), y.p, M, s.N, s.K, 1.0f, st); }, w8.copies,
                  stream, o.target_ms));
  }
  // The activation quantizers alone, as they run in front of the W4A4 GEMM (NVFP4) and of
  // cuBLASLt for nestedfp8 (E4M3 in the planes' K order): the part of those paths' time that is
  // not the GEMM.
  // xq: x quantized by W4A4's quantizer, all maxM rows (the W4A16 kernel is also timed on it).
  const bool any_w4 = std::any_of(o.formats.begin(), o.formats.end(), [](const std::string& f) { return f.find("nested") == std::string::npos; });
  const bool fp8 = std::find(o.formats.begin(), o.formats.end(), "nestedfp8") != o.formats.end();
  DeviceArray<uint16_t> xq(any_w4 ? size_t(maxM) * s.K : 0);
  DeviceArray<float> rs(maxM);
  for (int M : o.ms) {
    if (any_w4)
      add("nvfp4-act", "quantizer", M, time_us([&](int, cudaStream_t st) { quantize_rows_nvfp4(x.p, M, s.K, "nvfp4", 0, xq.p, rs.p, st); },
                                              1, stream, o.target_ms));
    if (fp8)
      add("e4m3-act", "quantizer", M, time_us([&](int, cudaStream_t st) {
            quantize_rows_e4m3_vec(x.p, M, s.K, x8.p, rs.p, st, KOrder::nested);
          }, 1, stream, o.target_ms));
  }
  if (any_w4) quantize_rows_nvfp4(x.p, maxM, s.K, "nvfp4", 0, xq.p, rs.p, stream);
  if (fp8) quantize_rows_e4m3(x.p, maxM, s.K, x8.p, row_scale.p, stream);  // back to the codes cuBLASLt is timed on
  for (const std::string& f : o.formats) {
    std::vector<GemmWeight> w;
    if (f == "nestedfp" || f == "nestedfp8") {
      nested.format = f;
      w = upload_copies(nested);
    } else {
      w = upload_copies(random_packed(f, s.N, s.K, 1234));
    }
    for (int M : o.ms)
      add(f, "fused", M, time_us([&](int c, cudaStream_t st) { gemm(x.p, M, w[size_t(c)], y.p, ws, st); },
                                 int(w.size()), stream, o.target_ms));
    if (f == "nestedfp" || f == "nestedfp8") continue;
    // W4A4: the activations quantized per token to NVFP4 on the GPU, then the same kernel.
    for (int M : o.ms)
      add(f, "w4a4-nvfp4", M, time_us([&](int c, cudaStream_t st) { gemm_w4a4(x.p, M, w[size_t(c)], "nvfp4", 0, y.p, ws, st); },
                                      int(w.size()), stream, o.target_ms));
    // The same W4A16 kernel on those quantized activations, without the quantizer in front: what
    // the activations' values alone change.
    for (int M : o.ms)
      add(f, "w4a16-on-w4a4-x", M, time_us([&](int c, cudaStream_t st) { gemm(xq.p, M, w[size_t(c)], y.p, ws, st); },
                                         int(w.size()), stream, o.target_ms));
    // The other large-M path: dequantize the whole weight to fp16 once per call, then cuBLAS.
    DeviceArray<uint16_t> w16(size_t(s.N) * s.K);
    for (int M : o.ms) {
      if (M < 64) continue;
      add(f, "dequant+cublas", M, time_us([&](int c, cudaStream_t st) {
            dequantize_fp16(w[size_t(c)], w16.p, st);
            blas.gemm(x.p, w16.p, y.p, M, s.N, s.K, st);
          }, int(w.size()), stream, o.target_ms));
    }
  }
}

double tflops(const Row& r) { return 2.0 * r.M * double(r.K) * r.N / (r.us * 1e-6) / 1e12; }

// The targets, computed from the rows.
std::string summary(const std::vector<Row>& rows) {
  // The row of format f at like's shape and M on `path`; by default its own kernel's row (not one
  // of the comparison paths a W4 format also has).
  auto find = [&](const std::string& f, const Row& like, int M, const std::string& path = "") -> const Row* {
    for (const Row& r : rows)
      if (r.format == f && r.K == like.K && r.N == like.N && r.M == M &&
          (path.empty() ? r.path != "dequant+cublas" && r.path != "w4a4-nvfp4" && r.path != "w4a16-on-w4a4-x"
                        : r.path == path))
        return &r;
    return nullptr;
  };
  std::string out = "\n## Targets (issue 5)\n\n";
  double ov = 0;
  int n_ov = 0;
  for (const Row& r : rows)
    if (r.format == "nestedfp" && r.M >= 32 && r.M <= 2048) ov += r.us / r.fp16_us - 1, ++n_ov;
  if (n_ov) out += fmt::format("- NestedFP16 mean overhead vs cuBLAS FP16, M 32..2048, {} points: {:+.1f}% (target <= 8%)\n", n_ov, 100 * ov / n_ov);
  for (const Row& r : rows) {
    if (r.M < 512) continue;
    if (r.format == "nestedfp8") {
      const Row* lt = find("fp8-cublaslt", r, r.M);
      out += fmt::format("- NestedFP8 {} {} M={}: {:.2f}x cuBLAS FP16 (target >= 1.5x), {:.2f}x cuBLASLt FP8 (target >= 0.9x)\n",
                         r.model, r.proj, r.M, r.fp16_us / r.us, lt ? lt->us / r.us : 0.0);
    }
  }
  for (const Row& r : rows) {
    if (r.path != "fused" || r.format.find("nested") != std::string::npos) continue;
    const Row* m1 = find(r.format, r, 1);
    if (r.M == 64 && m1) out += fmt::format("- {} {} {}: M=64 time / M=1 time = {:.2f} (target <= 1.3)\n", r.format, r.model, r.proj, r.us / m1->us);
    if (r.M >= 512) out += fmt::format("- {} {} {} M={}: {:.0f}% of cuBLAS FP16 throughput (target >= 80%)\n", r.format, r.model, r.proj, r.M, 100 * r.fp16_us / r.us);
  }
  // The quantizer's own time (timed alone) set against the gap: what the paths take besides it.
  for (const Row& r : rows)
    if (r.path == "w4a4-nvfp4" && r.M >= 256)
      if (const Row* f = find(r.format, r, r.M); f && f->path == "fused") {
        out += fmt::format("- W4A4 {} {} {} M={}: {:.0f}% of the W4A16 GEMM's throughput (target >= 90%)", r.format,
                           r.model, r.proj, r.M, 100 * f->us / r.us);
        if (const Row* q = find("nvfp4-act", r, r.M, "quantizer"))
          out += fmt::format("; quantizer alone {:.1f} us, the rest {:.0f}% of W4A16", q->us, 100 * f->us / (r.us - q->us));
        if (const Row* g = find(r.format, r, r.M, "w4a16-on-w4a4-x"))
          out += fmt::format("; the W4A16 kernel on the quantized activations {:.1f} us ({:.0f}% of W4A16)", g->us, 100 * f->us / g->us);
        out += "\n";
      }
  for (const Row& r : rows)
    if (r.format == "nestedfp8" && r.M >= 512)
      if (const Row* lt = find("fp8-cublaslt", r, r.M), *q = find("e4m3-act", r, r.M, "quantizer"); lt && q)
        out += fmt::format("- NestedFP8 {} {} M={}: quantizer alone {:.1f} us ({:.0f}% of the path), the rest {:.2f}x cuBLASLt FP8\n",
                           r.model, r.proj, r.M, q->us, 100 * q->us / r.us, lt->us / (r.us - q->us));
  out += "\n## Fused kernel vs dequant+cuBLAS: smallest M where dequant+cuBLAS is faster\n\n";
  for (const Row& r : rows) {
    if (r.path != "fused" || r.M != 1 || r.format.find("nested") != std::string::npos) continue;
    int cross = 0;
    for (const Row& d : rows)
      if (d.path == "dequant+cublas" && d.format == r.format && d.K == r.K && d.N == r.N)
        if (const Row* f = find(r.format, d, d.M); f && d.us < f->us && (cross == 0 || d.M < cross)) cross = d.M;
    out += fmt::format("- {} {} {}: {}\n", r.format, r.model, r.proj, cross ? "M >= " + std::to_string(cross) : "never (in the M measured)");
  }
  return out;
}

void write_results(const std::vector<Row>& rows, const Options& o, const DeviceInfo& dev) {
  const std::string date = today();
  nlohmann::json j = nlohmann::json::array();
  std::string md = fmt::format(
      "# GEMM benchmark, {}\n\nDevice: {} ({} SMs). Command: `nibble bench gemm`. us: median per call (CUDA-graph "
      "replay, weights rotated over > 3x L2 when smaller); TFLOP/s = 2MNK / time; %fp16 (= pct_of_floor in the "
      "JSON): cuBLAS FP16 time over this time, i.e. percent of cuBLAS FP16 throughput measured in the same run. "
      "nestedfp8 includes its per-token activation quantization kernel; fp8-cublaslt times the GEMM alone on "
      "pre-quantized E4M3 inputs; the quantizer rows (nvfp4-act: W4A4's, e4m3-act: NestedFP8's) time "
      "the activation quantizers alone.\n\n"
      "| format | path | model | proj | K | N | M | us | TFLOP/s | %fp16 |\n|---|---|---|---|---|---|---|---|---|---|\n",
      date, dev.name, dev.sm_count);
  for (const Row& r : rows) {
    const double speed = r.fp16_us > 0 ? r.fp16_us / r.us : 0.0;
    j.push_back({{"format", r.format}, {"path", r.path}, {"model", r.model}, {"proj", r.proj}, {"K", r.K}, {"N", r.N}, {"M", r.M},
                 {"us", r.us}, {"tflops", tflops(r)}, {"pct_of_floor", 100 * speed}, {"floor", "cuBLAS FP16 throughput"},
                 {"speedup_vs_fp16", speed}, {"device", dev.name}, {"date", date}});
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.0f} |\n", r.format, r.path, r.model, r.proj, r.K,
                      r.N, r.M, r.us, tflops(r), 100 * speed);
  }
  md += summary(rows);
  std::fputs(md.c_str(), stdout);
  cli::save_text(o.json, j.dump(1) + "\n", "bench gemm --json");
  cli::save_text(o.md, md, "bench gemm --md");
}

void run_bench(const Options& o) {
  for (const auto& f : o.formats)
    if (!has_gemm_kernel(f)) throw Error(fmt::format("bench gemm: --formats: '{}' has no GEMM kernel", f));
  for (int M : o.ms)
    if (M < 1 || M > 16384) throw Error(fmt::format("bench gemm: --m: {} is outside 1..16384", M));
  if (o.shapes != "all" && o.shapes != "llama" && o.shapes != "qwen")
    throw Error(fmt::format("bench gemm: --shapes: '{}' is not all, llama or qwen", o.shapes));
  const DeviceInfo dev = device_info();
  cudaStream_t stream;
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("device: %s, %d SMs\n", dev.name.c_str(), dev.sm_count);
  CublasFp16 blas;
  CublasLtFp8 lt;
  std::vector<Row> rows;
  for (const Shape& s : kBenchShapes) {
    const std::string model = s.model;
    if ((o.shapes == "llama" && model != "Llama-3.1-8B") || (o.shapes == "qwen" && model != "Qwen3-32B")) continue;
    std::fprintf(stderr, "bench gemm: %s %s (K=%d N=%d)\n", s.model, s.proj, s.K, s.N);
    bench_shape(s, o, stream, blas, lt, rows);
  }
  NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));
  write_results(rows, o, dev);
}

}  // namespace

static void setup_bench_gemm(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* cmd = nibble::cli::bench_group(app)->add_subcommand("gemm", "Time the tensor-core GEMMs vs cuBLAS (needs a GPU)");
  cmd->add_option("--json", opt->json, "write the rows as JSON");
  cmd->add_option("--md", opt->md, "write the Markdown table");
  cmd->add_option("--formats", opt->formats, "GEMM formats to time")->delimiter(',');
  cmd->add_option("--m", opt->ms, "activation rows M")->delimiter(',');
  cmd->add_option("--shapes", opt->shapes, "all, llama or qwen");
  cmd->add_option("--target-ms", opt->target_ms, "length of one timed graph replay")->check(CLI::Range(0.1, 100.0));
  cmd->callback([opt] { run_bench(*opt); });
}
NIBBLE_COMMAND(setup_bench_gemm);

#else  // built without CUDA: the command exists and says so

static void setup_bench_gemm(CLI::App& app) {
  nibble::cli::add_cuda_only_command(nibble::cli::bench_group(app), "gemm", "bench gemm", "Time the tensor-core GEMMs",
                                     {"--json", "--md", "--formats", "--m", "--shapes", "--target-ms"});
}
NIBBLE_COMMAND(setup_bench_gemm);

#endif

// `nibble bench kernels`: the decode GEMV kernels of every weight format on the projection shapes
// of Llama-3.1-8B and Qwen3-32B (or any KxN given), M in {1, 2, 4, 8, 16}, against the device copy bandwidth and
// cuBLAS FP16, both measured in the same run. CUDA-graph replay timing, weights rotated over
// several copies (more than the L2). Writes JSON rows and a Markdown table.
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"

#ifdef NIBBLE_HAVE_CUDA
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "nibble/cuda/bench.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/cublas_fp16.h"
#include "nibble/cuda/linear.h"
#include "nibble/cuda/tuning.h"
#include "nibble/error.h"
#include "nibble/half.h"

namespace {

using namespace nibble;
using namespace nibble::cuda;

using Shape = BenchShape;

struct Options {
  std::string json, md, tuning;
  std::vector<std::string> formats, shapes;
  std::vector<int> ms{1, 2, 4, 8, 16};
  int replays = 15;
};

struct Row {
  std::string format, variant, model, proj;
  int64_t K = 0, N = 0;
  int M = 0;
  double us = 0, bytes = 0, fp16_us = 0;
  std::string choice;  // the launch the dispatcher picked ("auto" rows only)
};

// --shapes entries: a projection name ("down"), model/proj ("Qwen3-32B/down") or KxN ("25600x5120").
bool shape_selected(const Shape& s, const std::vector<std::string>& sel) {
  if (sel.empty()) return true;
  for (const std::string& x : sel)
    if (x == s.proj || x == fmt::format("{}/{}", s.model, s.proj) || x == fmt::format("{}x{}", s.K, s.N)) return true;
  return false;
}

std::string choice_name(const std::string& format, const Shape& s, int M, bool has_tc) {
  const TunedChoice c = tuned_choice(format, s.K, s.N, M);
  if (c.engine == Engine::tensor_cores && has_tc)
    return fmt::format("tc rb{} ks{}", c.row_blocks, tensor_core_splits_supported() ? c.k_splits : 1);
  if (c.engine == Engine::tensor_stream && has_tc) return fmt::format("stream rb{}", c.row_blocks);
  return fmt::format("cc r{} ks{}{}", c.rows_per_warp, c.k_splits, c.fp4_decode == Fp4Decode::lut ? " lut" : "");
}

std::vector<uint16_t> random_halves(size_t n, uint64_t seed, float sd) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_half(d(g));
  return v;
}

// Variants the bench times per format: the dispatcher's choice ("auto", the number the targets are
// judged on), CUDA cores, tensor cores and the stream kernel (one and two row blocks) forced, and for
// the NVFP4 formats the CUDA-core shared-memory-table decoder against the bit decoder (paper 002's
// question).
std::vector<std::pair<std::string, LinearOptions>> variants_of(const std::string& format, bool has_tc) {
  LinearOptions cc, tc, lut;
  cc.engine = lut.engine = Engine::cuda_cores;
  cc.fp4_decode = Fp4Decode::bits;
  lut.fp4_decode = Fp4Decode::lut;
  tc.engine = Engine::tensor_cores;
  LinearOptions ks1 = cc;
  ks1.k_splits = 1;  // the CUDA-core kernel without K splits (M = 1 only): what the split buys
  std::vector<std::pair<std::string, LinearOptions>> v{{"auto", {}}, {"cuda-cores", cc}, {"cuda-cores-ks1", ks1}};
  if (format == "nvfp4" || format == "nvfp4-razer") v.push_back({"cuda-cores-lut", lut});
  if (has_tc) v.push_back({"tensor-cores", tc});
  if (has_tc)
    for (int rb : {1, 2}) {
      LinearOptions st;
      st.engine = Engine::tensor_stream, st.row_blocks = rb;
      v.push_back({fmt::format("tensor-stream-rb{}", rb), st});
    }
  return v;
}

void bench_shape(const Shape& s, const Options& o, cudaStream_t stream, CublasFp16& blas, std::vector<Row>& rows) {
  const int maxM = 16;
  DeviceArray<uint16_t> x(size_t(maxM) * s.K), y(size_t(maxM) * s.N);
  {
    const auto hx = random_halves(size_t(maxM) * s.K, 7, 1.0f);
    NIBBLE_CUDA_CHECK(cudaMemcpy(x.p, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  }
  // cuBLAS FP16 reference
  std::map<int, double> fp16_us;
  {
    const size_t wbytes = size_t(s.N) * s.K * 2;
    const int copies = rotation_copies(wbytes);
    DeviceArray<uint16_t> w(size_t(copies) * s.N * s.K);
    const auto hw = random_halves(size_t(s.N) * s.K, 11, 0.02f);
    for (int c = 0; c < copies; ++c)
      NIBBLE_CUDA_CHECK(cudaMemcpy(w.p + size_t(c) * s.N * s.K, hw.data(), wbytes, cudaMemcpyHostToDevice));
    for (int M : o.ms) {
      const double us = time_rotated_us(
          [&](int c, cudaStream_t st) { blas.gemm(x.p, w.p + size_t(c) * s.N * s.K, y.p, M, int(s.N), int(s.K), st); },
          copies, stream, 48, o.replays);
      fp16_us[M] = us;
      rows.push_back({"fp16", "cublas", s.model, s.proj, s.K, s.N, M, us,
                      double(wbytes) + 2.0 * M * (s.K + s.N), us, ""});
    }
  }
  for (const std::string& f : o.formats) {
    const PackedTensor t = random_packed(f, s.N, s.K, 1234);
    std::vector<DeviceWeight> copies;
    copies.push_back(upload(t, f));
    const int ncopies = rotation_copies(copies[0].bytes());
    while (int(copies.size()) < ncopies) copies.push_back(upload(t, f));
    for (const auto& [vname, opt] : variants_of(f, copies[0].qweight_mma != nullptr)) {
      for (int M : o.ms) {
        // CUDA cores at M >= 4 run 2-10x behind the tensor cores (docs/perf/kernels-2026-11-22.md):
        // timed only where there is no tensor-core kernel
        if (vname == "cuda-cores-ks1" && M != 1) continue;
        if (vname.rfind("cuda-cores", 0) == 0 && M > 2 && copies[0].qweight_mma) continue;
        if (vname.rfind("tensor-stream", 0) == 0 && !stream_kernel_fits(copies[0], M, opt.row_blocks)) continue;
        const double us = time_rotated_us(
            [&](int c, cudaStream_t st) { linear(x.p, M, copies[size_t(c)], y.p, st, opt); }, ncopies, stream, 48,
            o.replays);
        rows.push_back({f, vname, s.model, s.proj, s.K, s.N, M, us,
                        double(copies[0].bytes()) + 2.0 * M * (s.K + s.N), fp16_us[M],
                        vname == "auto" ? choice_name(f, s, M, copies[0].qweight_mma != nullptr) : ""});
      }
    }
    if (f == "nf4") {  // paper 003: dequantize to fp16, branch tree vs shared-memory table
      DeviceArray<uint16_t> out(size_t(s.N) * s.K);
      for (auto [name, which] : {std::pair{"dequant-tree", Nf4Dequant::branch_tree},
                                 std::pair{"dequant-lut", Nf4Dequant::shared_lut}}) {
        const double us = time_rotated_us(
            [&](int c, cudaStream_t st) { nf4_dequantize(copies[size_t(c)], out.p, which, st); }, ncopies, stream, 24,
            o.replays);
        rows.push_back({"nf4", name, s.model, s.proj, s.K, s.N, 0, us,
                        double(copies[0].bytes()) + 2.0 * double(s.N) * s.K, 0.0, ""});
      }
    }
  }
}

void run_bench(const Options& opt_in) {
  Options o = opt_in;
  if (o.formats.empty())
    for (const auto& f : kernel_formats())
      if (f != "nvfp4-4over6") o.formats.push_back(f);  // same storage and kernel as nvfp4
  for (const auto& f : o.formats)
    if (!has_kernel(f)) throw Error(fmt::format("bench kernels: --formats: '{}' has no CUDA kernel", f));
  for (int M : o.ms)
    if (M < 1 || M > 16) throw Error(fmt::format("bench kernels: --m: {} is outside 1..16", M));
  // The bench shapes selected, then any other KxN as a "custom" shape.
  std::vector<Shape> shapes;
  for (const Shape& s : kBenchShapes)
    if (shape_selected(s, o.shapes)) shapes.push_back(s);
  std::deque<std::string> custom_names;  // stable storage for the custom shapes' names
  for (const auto& x : o.shapes) {
    bool known = false;
    for (const Shape& s : kBenchShapes) known = known || shape_selected(s, {x});
    if (known) continue;
    const auto kn = cli::parse_kxn(x);
    if (!kn || kn->first % 128 != 0 || kn->first > (1 << 20) || kn->second > (1 << 20))
      throw Error(fmt::format(
          "bench kernels: --shapes: '{}' is no bench shape (proj, model/proj) and no KxN with K a multiple of 128", x));
    shapes.push_back({"custom", custom_names.emplace_back(x).c_str(), int(kn->first), int(kn->second)});
  }
  if (!o.tuning.empty()) load_tuning_table(o.tuning);

  const DeviceInfo dev = device_info();
  cudaStream_t stream;
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double copy_gbps = copy_bandwidth_gbps(size_t(1) << 30, stream);
  std::printf("device: %s, %d SMs, L2 %.0f MB; copy bandwidth %.0f GB/s (read + write)\n", dev.name.c_str(),
              dev.sm_count, dev.l2_bytes / 1e6, copy_gbps);
  CublasFp16 blas;
  std::vector<Row> rows;
  for (const Shape& s : shapes) {
    std::fprintf(stderr, "bench: %s %s (K=%ld N=%ld)\n", s.model, s.proj, long(s.K), long(s.N));
    bench_shape(s, o, stream, blas, rows);
  }
  NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));

  const std::string date = today();
  nlohmann::json j = nlohmann::json::array();
  std::string md = fmt::format(
      "# Kernel benchmark, {}\n\nDevice: {} ({} SMs, L2 {:.0f} MB). Copy bandwidth measured in the same run: "
      "{:.0f} GB/s (cudaMemcpy D2D, read + write).\nus: median per call (CUDA-graph replay, weights rotated over "
      "> 3x L2); %floor: copy-bandwidth time of the bytes moved (weights + scales + X + Y) over the measured time; "
      "xfp16: cuBLAS FP16 time (same run) over this time. Command: `nibble bench kernels`.\n\n"
      "| format | variant | model | proj | K | N | M | us | GB/s | %floor | xfp16 | launch |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      date, dev.name, dev.sm_count, dev.l2_bytes / 1e6, copy_gbps);
  for (const Row& r : rows) {
    const double gbps = r.bytes / (r.us * 1e-6) / 1e9;
    const double pct = 100.0 * gbps / copy_gbps;
    const double speedup = r.fp16_us > 0 ? r.fp16_us / r.us : 0.0;
    j.push_back({{"format", r.format}, {"variant", r.variant}, {"model", r.model}, {"proj", r.proj}, {"K", r.K},
                 {"N", r.N}, {"M", r.M}, {"us", r.us}, {"bytes", r.bytes}, {"gbps", gbps}, {"pct_of_floor", pct},
                 {"speedup_vs_fp16", speedup}, {"copy_gbps", copy_gbps}, {"device", dev.name}, {"date", date},
                 {"launch", r.choice}});
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.1f} | {:.0f} | {:.1f} | {:.2f} | {} |\n", r.format,
                      r.variant, r.model, r.proj, r.K, r.N, r.M, r.us, gbps, pct, speedup, r.choice);
  }
  std::fputs(md.c_str(), stdout);
  cli::save_text(o.json, j.dump(1) + "\n", "bench kernels --json");
  cli::save_text(o.md, md, "bench kernels --md");
}

}  // namespace

static void setup_bench_kernels(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* cmd = nibble::cli::bench_group(app)->add_subcommand("kernels", "Time the CUDA decode GEMV kernels (needs a GPU)");
  cmd->add_option("--json", opt->json, "write the rows as JSON");
  cmd->add_option("--md", opt->md, "write the Markdown table");
  cmd->add_option("--formats", opt->formats, "formats to time (default: every format with a kernel)")->delimiter(',');
  cmd->add_option("--m", opt->ms, "activation rows M (default 1,2,4,8,16)")->delimiter(',');
  cmd->add_option("--shapes", opt->shapes, "shapes to time: proj (down), model/proj or KxN (default: all)")
      ->delimiter(',');
  cmd->add_option("--replays", opt->replays, "timed graph replays per point")->check(CLI::Range(3, 1000));
  cmd->add_option("--tuning", opt->tuning, "tuning table (from `nibble tune`) for the dispatcher");
  cmd->callback([opt] { run_bench(*opt); });
}
NIBBLE_COMMAND(setup_bench_kernels);

#else  // built without CUDA: the command exists and says so

static void setup_bench_kernels(CLI::App& app) {
  nibble::cli::add_cuda_only_command(nibble::cli::bench_group(app), "kernels", "bench kernels", "Time the CUDA decode GEMV kernels",
                                     {"--json", "--md", "--formats", "--m", "--shapes", "--replays", "--tuning"});
}
NIBBLE_COMMAND(setup_bench_kernels);

#endif

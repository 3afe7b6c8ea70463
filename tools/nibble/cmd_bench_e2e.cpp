// `nibble bench e2e`: whole models on the GPU. Per model x weight format: quantize on load, upload
// (DeviceModel), then prefill tokens/s of a random prompt and decode tokens/s at several batch
// sizes (CUDA-graph steps, greedy sampling on the device), against the bandwidth floor of a step
// (weight bytes + KV-cache bytes read, over the copy bandwidth measured in the same run), the FP16
// path of the same model in the same run, and the cost of the ReSET sampler (entropy on the
// device, the rule on the host, temperature + top-p sampling on the device) over a greedy step.
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"

#ifdef NIBBLE_HAVE_CUDA
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "nibble/cuda/bench.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/linear.h"
#include "nibble/cuda/tuning.h"
#include "nibble/cuda/runtime.h"
#include "nibble/error.h"
#include "nibble/model.h"
#include "nibble/sampler.h"

namespace {

using namespace nibble;
using namespace nibble::cuda;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> models, formats;
  std::vector<std::string> kv_caches{"fp16"};  // KV-cache formats, each a run of every batch size
  std::vector<int> batches{1, 4, 16, 64};
  int prompt = 512, steps = 32;
  int max_context = 0;  // KV-cache positions per slot (0: what the prompt and the steps need)
  bool quantize_lm_head = false;
  bool profile = false;  // time one decode step op by op per batch size
  bool in_step = false;  // time the graph step with each op left out in turn, per batch size
  bool no_stack = false;  // q/k/v and gate/up as separate launches (DeviceModelOptions::stack_linears)
  double time_limit = 0;  // seconds; 0: none
  std::string json, md, tuning;
};

// One (model, format, batch) result.
struct Row {
  std::string model, format, kv_cache;
  int batch = 0, context = 0;
  double load_s = 0, upload_s = 0, prefill_tps = 0, tps = 0, step_us = 0, floor_us = 0, reset_pct = 0, entropy_pct = 0,
         sampled_pct = 0;
  double weight_bytes = 0, kv_bytes = 0, fp16_tps = 0;
  std::vector<OpTime> profile;  // --profile: the median step of kProfileSteps, op by op
  // --in-step: the greedy graph step (us) with each op left out ("": none, timed first and last)
  std::vector<std::pair<std::string, double>> in_step;
  int layers = 0;
};

constexpr int kPromptVocab = 49152;  // the stand-in tokenizer's size: prompts stay inside it
constexpr int kWarmupSteps = 2;      // the first step of a batch size captures its graph
// Decode passes per batch, in an order whose context growth cancels out between the modes.
// entropy: greedy + the device entropies copied back; sampled: a fixed temperature + top-p on the
// device (the sampler ReSET replaces, paper 002's baseline); reset: the ReSET rule applied on the
// device from each controller's threshold (Batch::sample_by_entropy), then temperature + top-p.
enum class Mode { greedy, entropy, sampled, reset };
constexpr Mode kPassModes[] = {Mode::greedy, Mode::reset,   Mode::entropy, Mode::sampled,
                               Mode::sampled, Mode::entropy, Mode::reset,   Mode::greedy};
constexpr float kBaselineTemperature = 0.6f;  // a common reasoning-model setting, with ReSET's top-p
constexpr int kPasses = int(std::size(kPassModes));
constexpr int kProfileSteps = 5;
// --time-limit guesses a model's first format to take this per GB of safetensors (Llama-3.1-8B
// bf16 on an H100 host: 119 s to load as stored, then ~10 s of benchmark).
constexpr double kGuessSecondsPerGB = 8;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int32_t> random_prompt(int n, int vocab, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int32_t> id(0, std::min(vocab, kPromptVocab) - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& i : ids) i = id(g);
  return ids;
}

double first_format_guess_s(const std::string& dir) {
  double bytes = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") bytes += double(e.file_size(ec));
  return kGuessSecondsPerGB * bytes / 1e9;
}

std::string model_name(const std::string& dir) {
  std::filesystem::path p(dir);
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

LoadOptions load_options(const std::string& dir, const std::string& format, const Options& o) {
  LoadOptions lo;
  // fp16: the weights as stored (bf16 / fp16 / fp32), held as FP16 on the device; a
  // nibble-quantized directory is dequantized to fp16 on load instead.
  const bool packed = ModelConfig::load(dir).quantization.is_object();
  lo.weight_format = format == "fp16" && !packed ? "" : format;
  lo.quantize_lm_head = o.quantize_lm_head && format != "fp16";
  lo.progress = true;
  return lo;
}

// Median seconds of a prefill of the whole prompt into slot 0 (one warm-up first).
double time_prefill(Batch& b, const std::vector<int32_t>& prompt) {
  std::vector<double> t;
  for (int i = 0; i < 4; ++i) {
    b.reset(0);
    NIBBLE_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
    const auto t0 = Clock::now();
    b.prefill(0, prompt);  // returns host logits: synchronous
    if (i > 0) t.push_back(seconds_since(t0));
  }
  return median(t);
}

// The ReSET rule per sequence, fed with the entropies computed on the device.
struct ResetRows {
  std::vector<ResetController> ctl;
  std::mt19937_64 rng{12345};
  ResetRows(int B, const Tokenizer& tok) {
    const int V = tok.vocab_size();
    // Random-weight models sample ids the stand-in tokenizer does not have: they read as "".
    TokenTextFn text = [&tok, V](int32_t id) { return id < V ? tok.token_text(id) : std::string(); };
    for (int i = 0; i < B; ++i) ctl.emplace_back(ResetParams{}, text);
  }
  // One ReSET token per row: the rule applied on the device (Batch::sample_by_entropy), then the
  // controllers advanced with the entropies and tokens that came back.
  std::vector<int32_t> sample(Batch& b) {
    std::vector<EntropyRule> rules(ctl.size());
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (size_t i = 0; i < ctl.size(); ++i) rules[i] = entropy_rule(ctl[i], u(rng));
    std::vector<float> entropy;
    const std::vector<int32_t> tokens = b.sample_by_entropy(rules, &entropy);
    for (size_t i = 0; i < tokens.size(); ++i) {
      ctl[i].decide_entropy(entropy[i]);
      ctl[i].accept(tokens[i]);
    }
    return tokens;
  }
};

// Seconds per step of `steps` decode steps on slots [0, B), sampling on the device.
double time_decode(Batch& b, std::vector<int32_t>& tokens, int steps, Mode mode, ResetRows& reset) {
  const int B = int(tokens.size());
  std::vector<int> slots(static_cast<size_t>(B));
  std::iota(slots.begin(), slots.end(), 0);
  const std::vector<SampleParams> greedy(static_cast<size_t>(B));
  std::vector<SampleParams> fixed(static_cast<size_t>(B), {kBaselineTemperature, float(ResetParams{}.top_p), 0});
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    b.step(slots, tokens);
    if (mode == Mode::reset) {
      tokens = reset.sample(b);
    } else if (mode == Mode::sampled) {
      for (SampleParams& p : fixed) p.u = uniform(reset.rng);
      tokens = b.sample(fixed);
    } else {
      if (mode == Mode::entropy) b.entropies();
      tokens = b.sample(greedy);  // host tokens: synchronous
    }
  }
  return seconds_since(t0) / steps;
}

// Op-by-op times of a decode step on slots [0, B): per op, the median over kProfileSteps steps.
std::vector<OpTime> profile_decode(Batch& b, std::vector<int32_t>& tokens) {
  std::vector<int> slots(tokens.size());
  std::iota(slots.begin(), slots.end(), 0);
  const std::vector<SampleParams> greedy(tokens.size());
  std::vector<std::vector<OpTime>> runs;
  for (int i = 0; i < kProfileSteps; ++i) {
    runs.push_back(b.profile_step(slots, tokens));
    tokens = b.sample(greedy);
  }
  std::vector<OpTime> out = runs[0];
  for (size_t k = 0; k < out.size(); ++k) {
    std::vector<double> us;
    for (const auto& r : runs) us.push_back(r[k].us);
    out[k].us = median(us);
  }
  return out;
}

// Prefills slots [0, B) with the prompt; each slot's greedy next token.
std::vector<int32_t> prefill_slots(Batch& b, const std::vector<int32_t>& prompt, int B) {
  std::vector<int32_t> tokens(static_cast<size_t>(B));
  for (int s = 0; s < B; ++s) {
    b.reset(s);
    const std::vector<float> logits = b.prefill(s, prompt);
    tokens[size_t(s)] = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  return tokens;
}

// --in-step: greedy graph steps of B rows with each decode op left out of every layer in turn
// (Batch::skip_decode_ops; timing only), each from a fresh prefill so the context stays that of
// the prompt; the full step is timed first and last. An op's cost inside the graph, neighbours
// and programmatic dependent launch included, is the full step's time minus the step without it.
std::vector<std::pair<std::string, double>> in_step_steps(Batch& b, const Model& m, const std::vector<int32_t>& prompt,
                                                          int steps, int B) {
  std::vector<std::string> ops{""};
  for (const std::string& op : Batch::decode_op_names()) ops.push_back(op);
  ops.push_back("");
  ResetRows unused(B, m.tokenizer());
  std::vector<std::pair<std::string, double>> out;
  for (const std::string& op : ops) {
    std::vector<int32_t> tokens = prefill_slots(b, prompt, B);
    b.skip_decode_ops(op.empty() ? std::vector<std::string>{} : std::vector<std::string>{op});
    time_decode(b, tokens, kWarmupSteps, Mode::greedy, unused);  // captures the graph
    out.emplace_back(op, time_decode(b, tokens, steps, Mode::greedy, unused) * 1e6);
  }
  b.skip_decode_ops({});
  return out;
}

// Prefills slots [0, B) with the prompt, then runs the decode passes; fills the row's step_us,
// tps, sampled_pct, reset_pct, entropy_pct (and profile).
void bench_batch(Batch& b, const Model& m, const std::vector<int32_t>& prompt, int steps, bool profile, Row& r) {
  const int B = r.batch;
  std::vector<int32_t> tokens = prefill_slots(b, prompt, B);
  ResetRows reset(B, m.tokenizer());
  time_decode(b, tokens, kWarmupSteps, Mode::reset, reset);  // captures the graph, warms every path
  std::map<Mode, double> t;  // mean seconds per step
  for (Mode mode : kPassModes) t[mode] += time_decode(b, tokens, steps, mode, reset) / 2;
  const double greedy = t[Mode::greedy];
  r.step_us = greedy * 1e6;
  r.tps = B / greedy;
  r.sampled_pct = 100.0 * (t[Mode::sampled] - greedy) / greedy;
  r.reset_pct = 100.0 * (t[Mode::reset] - t[Mode::sampled]) / t[Mode::sampled];
  r.entropy_pct = 100.0 * (t[Mode::entropy] - greedy) / greedy;
  r.context = int(prompt.size()) + kWarmupSteps + kPasses * steps / 2;  // mean context of the timed steps
  r.kv_bytes = double(Batch::kv_cache_bytes(m.config(), B, r.context, kv_type(r.kv_cache)));
  if (profile) r.profile = profile_decode(b, tokens);
}

void bench_format(const std::string& dir, const std::string& format, const Options& o, double copy_gbps,
                  std::vector<Row>& rows) {
  const auto t0 = Clock::now();
  const std::unique_ptr<Model> m = Model::load(dir, load_options(dir, format, o));
  const double load_s = seconds_since(t0);
  const auto t1 = Clock::now();
  DeviceModel dm(*m, {.progress = true, .stack_linears = !o.no_stack});
  const double upload_s = seconds_since(t1);
  const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  const int need = o.prompt + kWarmupSteps + kPasses * o.steps + 8;
  if (o.max_context > 0 && o.max_context < need)
    throw Error(fmt::format("bench e2e: --max-context {} is below the {} positions that --prompt {} and --steps {} need",
                            o.max_context, need, o.prompt, o.steps));
  const int ctx = o.max_context > 0 ? o.max_context : need;
  const std::vector<int32_t> prompt = random_prompt(o.prompt, m->config().vocab_size, 42);
  for (const std::string& kv : o.kv_caches) {
    Batch b(dm, {.max_batch = max_batch, .max_context = ctx, .cuda_graphs = true, .kv = kv_type(kv)});
    const double prefill_tps = o.prompt / time_prefill(b, prompt);
    std::fprintf(stderr,
                 "bench e2e: %s %s, KV cache %s: load %.1f s, upload %.1f s, %.2f GB of weights, prefill %.0f "
                 "tokens/s\n",
                 model_name(dir).c_str(), format.c_str(), kv.c_str(), load_s, upload_s, dm.weight_bytes() / 1e9,
                 prefill_tps);
    for (int B : o.batches) {
      Row r;
      r.model = model_name(dir), r.format = format, r.kv_cache = kv, r.batch = B;
      r.load_s = load_s;
      r.upload_s = upload_s;
      r.prefill_tps = prefill_tps;
      r.weight_bytes = double(dm.weight_bytes());
      bench_batch(b, *m, prompt, o.steps, o.profile, r);
      if (o.in_step) r.in_step = in_step_steps(b, *m, prompt, o.steps, B), r.layers = m->config().num_layers;
      r.floor_us = (r.weight_bytes + r.kv_bytes) / (copy_gbps * 1e3);
      std::fprintf(stderr,
                   "bench e2e:   batch %d: %.1f tokens/s, %.0f us/step (floor %.0f us), top-p sampling %+.2f%%, "
                   "ReSET %+.2f%% over it (entropy %+.2f%%)\n",
                   B, r.tps, r.step_us, r.floor_us, r.sampled_pct, r.reset_pct, r.entropy_pct);
      rows.push_back(r);
    }
  }
}

// The --profile tables: where a decode step's time goes, per row.
std::string profile_markdown(const std::vector<Row>& rows) {
  std::string md;
  for (const Row& r : rows) {
    if (r.profile.empty()) continue;
    double total = 0;
    for (const OpTime& t : r.profile) total += t.us;
    md += fmt::format(
        "\n## Profile: {} {} KV {} batch {} (one step op by op, no graph: {:.0f} us; the graph step: {:.0f} us)\n\n"
        "| op | calls | us | % |\n|---|---|---|---|\n",
        r.model, r.format, r.kv_cache, r.batch, total, r.step_us);
    for (const OpTime& t : r.profile)
      md += fmt::format("| {} | {} | {:.1f} | {:.1f} |\n", t.op, t.calls, t.us, 100.0 * t.us / total);
  }
  return md;
}

// The --in-step tables: each decode op's cost inside the graph step, per row.
std::string in_step_markdown(const std::vector<Row>& rows) {
  std::string md;
  for (const Row& r : rows) {
    if (r.in_step.size() < 2) continue;
    const double full = (r.in_step.front().second + r.in_step.back().second) / 2;
    md += fmt::format(
        "\n## In-step costs: {} {} KV {} batch {} (greedy graph steps, each op left out of all {} layers in turn; "
        "full step {:.0f} / {:.0f} us, timed first and last)\n\n| op left out | step us | cost per step us | per layer "
        "us | % of step |\n|---|---|---|---|---|\n",
        r.model, r.format, r.kv_cache, r.batch, r.layers, r.in_step.front().second, r.in_step.back().second);
    for (size_t i = 1; i + 1 < r.in_step.size(); ++i) {
      const double cost = full - r.in_step[i].second;
      md += fmt::format("| {} | {:.0f} | {:.1f} | {:.2f} | {:.1f} |\n", r.in_step[i].first, r.in_step[i].second, cost,
                        cost / r.layers, 100.0 * cost / full);
    }
  }
  return md;
}

// Writes --json / --md with the rows so far (after every format, so a run cut short keeps them);
// prints the table when `print`.
void write_results(const std::vector<Row>& rows, const DeviceInfo& dev, double copy_gbps, const Options& o,
                   bool print) {
  const std::string date = today();
  nlohmann::json j = nlohmann::json::array();
  std::string md = fmt::format(
      "# End-to-end benchmark, {}\n\nDevice: {} ({} SMs). Copy bandwidth measured in the same run: {:.0f} GB/s "
      "(cudaMemcpy D2D, read + write).\nPrefill: {} random tokens into one slot. Decode: {} CUDA-graph steps per "
      "pass after {} warm-up steps, greedy sampling on the device; tokens/s = batch / step time. floor: (weight bytes "
      "+ KV-cache bytes read at the mean context) / copy bandwidth; %floor = floor / step time; xfp16: over the FP16 "
      "path of the same model at the same batch and KV cache (same run); top-p %: extra time of a step sampled on the device at "
      "temperature {}, top-p {} over a greedy step; ReSET %: extra time of a ReSET step (device entropies, the "
      "rule applied on the device from each host controller's threshold, then temperature + top-p on the device; "
      "the controllers updated with the entropies and tokens that come back) over that top-p step, i.e. what "
      "ReSET adds to the sampler "
      "it replaces (paper 002's measure); entropy %: the device entropies alone over greedy. Weights are random "
      "where the model says so (`nibble init-random`). {} Command: `nibble bench e2e`.\n\n"
      "| model | format | KV cache | batch | prefill tok/s | decode tok/s | step us | floor us | %floor | xfp16 | top-p % | "
      "ReSET % | entropy % |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      date, dev.name, dev.sm_count, copy_gbps, o.prompt, o.steps, kWarmupSteps, kBaselineTemperature,
      ResetParams{}.top_p,
      o.quantize_lm_head ? "Output layer: quantized to the row's format (--quantize-lm-head; FP16 rows keep it FP16)."
                         : "Output layer: unquantized (FP16 on the GPU).");
  for (const Row& r : rows) {
    const double pct = 100.0 * r.floor_us / r.step_us;
    const double speedup = r.fp16_tps > 0 ? r.tps / r.fp16_tps : 0.0;
    j.push_back({{"format", r.format}, {"model", r.model}, {"kv_cache", r.kv_cache}, {"batch", r.batch}, {"tokens_per_s", r.tps},
                 {"pct_of_floor", pct}, {"speedup_vs_fp16", speedup}, {"device", dev.name}, {"date", date},
                 {"prefill_tokens_per_s", r.prefill_tps}, {"step_us", r.step_us}, {"floor_us", r.floor_us},
                 {"reset_pct_over_topp_step", r.reset_pct}, {"topp_sampling_pct_of_step", r.sampled_pct}, {"entropy_pct_of_step", r.entropy_pct}, {"weight_bytes", r.weight_bytes}, {"kv_bytes", r.kv_bytes},
                 {"context", r.context}, {"copy_gbps", copy_gbps}, {"load_s", r.load_s}, {"upload_s", r.upload_s}, {"prompt", o.prompt},
                 {"steps", o.steps}, {"lm_head_quantized", o.quantize_lm_head && r.format != "fp16"}});
    for (const OpTime& t : r.profile) j.back()["profile"].push_back({{"op", t.op}, {"calls", t.calls}, {"us", t.us}});
    for (const auto& [op, us] : r.in_step) j.back()["in_step"].push_back({{"left_out", op}, {"step_us", us}});
    md += fmt::format("| {} | {} | {} | {} | {:.0f} | {:.1f} | {:.0f} | {:.0f} | {:.1f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n",
                      r.model, r.format, r.kv_cache, r.batch, r.prefill_tps, r.tps, r.step_us, r.floor_us, pct, speedup,
                      r.sampled_pct, r.reset_pct, r.entropy_pct);
  }
  md += profile_markdown(rows);
  md += in_step_markdown(rows);
  if (print) std::fputs(md.c_str(), stdout);
  cli::save_text(o.json, j.dump(1) + "\n", "bench e2e --json");
  cli::save_text(o.md, md, "bench e2e --md");
}

void check_options(Options& o) {
  if (o.models.empty()) throw Error("bench e2e: -m: give at least one model directory");
  if (o.formats.empty()) o.formats = {"fp16", "nvfp4", "nvfp4-razer", "mxfp4", "nf4", "int4-g128", "razer-fp4-g128", "fp4-g128"};
  for (const std::string& f : o.formats) {
    find_format(f);  // unknown names: a clear error listing the known ones
    if (f != "fp16" && !has_kernel(f)) throw Error(fmt::format("bench e2e: --formats: '{}' has no CUDA kernel", f));
  }
  // fp16 first: the other formats' speedups need it
  std::stable_partition(o.formats.begin(), o.formats.end(), [](const std::string& f) { return f == "fp16"; });
  for (int B : o.batches)
    if (B < 1) throw Error(fmt::format("bench e2e: --batches: {} is not a positive batch size", B));
  if (o.kv_caches.empty()) throw Error("bench e2e: --kv-cache: give at least one KV-cache format");
  for (const std::string& kv : o.kv_caches) kv_type(kv);  // the GPU's KV formats only
  if (o.prompt < 1 || o.steps < 1) throw Error("bench e2e: --prompt and --steps must be positive");
}

void run_bench(Options o) {
  check_options(o);
  if (!o.tuning.empty()) load_tuning_table(o.tuning);
  const DeviceInfo dev = device_info();
  cudaStream_t stream;
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double copy_gbps = copy_bandwidth_gbps(size_t(1) << 30, stream);
  NIBBLE_CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("device: %s, %d SMs; copy bandwidth %.0f GB/s (read + write)\n", dev.name.c_str(), dev.sm_count,
              copy_gbps);
  const auto start = Clock::now();
  std::vector<Row> rows;
  for (const std::string& dir : o.models) {
    std::map<std::pair<std::string, int>, double> fp16_tps;  // (KV cache, batch)
    double longest = first_format_guess_s(dir);  // seconds of this model's slowest format so far
    for (const std::string& f : o.formats) {
      if (o.time_limit > 0 && seconds_since(start) + longest > o.time_limit) {
        std::fprintf(stderr, "bench e2e: %s %s: skipped, --time-limit %.0f s would be exceeded\n",
                     model_name(dir).c_str(), f.c_str(), o.time_limit);
        continue;
      }
      const auto t0 = Clock::now();
      const size_t first = rows.size();
      try {
        bench_format(dir, f, o, copy_gbps, rows);
      } catch (const Error& e) {  // one format failing (e.g. out of memory) does not end the run
        std::fprintf(stderr, "bench e2e: %s %s: skipped: %s\n", model_name(dir).c_str(), f.c_str(), e.what());
        continue;
      }
      longest = std::max(longest, seconds_since(t0));
      for (size_t i = first; i < rows.size(); ++i) {
        const std::pair<std::string, int> key{rows[i].kv_cache, rows[i].batch};
        if (f == "fp16") fp16_tps[key] = rows[i].tps;
        rows[i].fp16_tps = fp16_tps.count(key) ? fp16_tps[key] : 0.0;
      }
      write_results(rows, dev, copy_gbps, o, false);
    }
  }
  write_results(rows, dev, copy_gbps, o, true);
}

}  // namespace

static void setup_bench_e2e(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* cmd = nibble::cli::bench_group(app)->add_subcommand("e2e", "Whole models on the GPU: prefill and decode tokens/s per format");
  cmd->add_option("-m,--model", opt->models, "model directories (repeat, or a comma list)")->delimiter(',')->required();
  cmd->add_option("--formats", opt->formats, "weight formats (default: fp16 + every 4-bit format with a kernel)")
      ->delimiter(',');
  cmd->add_option("--prompt", opt->prompt, "prefill prompt length (default 512)");
  cmd->add_option("--batches", opt->batches, "decode batch sizes (default 1,4,16,64)")->delimiter(',');
  cmd->add_option("--steps", opt->steps, "timed decode steps per pass (default 32)");
  cmd->add_option("--kv-cache", opt->kv_caches, "KV-cache formats to run every batch size with: fp16, fp8-e4m3 (default fp16)")
      ->delimiter(',');
  cmd->add_option("--max-context", opt->max_context,
                  "KV-cache positions per slot, as a server would size it (default: what the prompt and the steps need)");
  cmd->add_flag("--no-stack", opt->no_stack, "run q/k/v and gate/up as separate GEMV launches (for comparison)");
  cmd->add_flag("--profile", opt->profile, "also time one decode step op by op per batch size (Markdown: a table per row)");
  cmd->add_flag("--in-step", opt->in_step,
                "also time the graph step with each op left out of every layer in turn: each op's cost inside the "
                "step (timing only; Markdown: a table per row)");
  cmd->add_flag("--quantize-lm-head", opt->quantize_lm_head, "also quantize the output layer (default: kept as stored)");
  cmd->add_option("--time-limit", opt->time_limit, "seconds: start no format that would end after this (0: none)");
  cmd->add_option("--tuning", opt->tuning, "tuning table (from `nibble tune`) for the dispatcher");
  cmd->add_option("--json", opt->json, "write the rows as JSON (rewritten after every format)");
  cmd->add_option("--md", opt->md, "write the Markdown table (rewritten after every format)");
  cmd->callback([opt] { run_bench(*opt); });
}
NIBBLE_COMMAND(setup_bench_e2e);

#else  // built without CUDA: the command exists and says so

static void setup_bench_e2e(CLI::App& app) {
  nibble::cli::add_cuda_only_command(nibble::cli::bench_group(app), "e2e", "bench e2e", "Whole models on the GPU",
                                     {"-m,--model", "--formats", "--kv-cache", "--prompt", "--batches", "--steps", "--time-limit", "--tuning", "--json", "--md"}, {"--quantize-lm-head", "--in-step"});
}
NIBBLE_COMMAND(setup_bench_e2e);

#endif

// nibble generate: text generation from a prompt, streamed to stdout token by token, with the
// samplers of nibble/sampler.h (default: temperature + top-k/top-p/min-p; greedy; ReSET).
// Timing goes to stderr at the end. --device cuda runs the model on the GPU and samples there
// (greedy, temperature + top-p, ReSET from the GPU's entropy); top-k / min-p use the CPU sampler
// on the copied logits.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cmd_model_options.h"
#include "command.h"
#include "nibble/error.h"
#include "nibble/model.h"
#include "nibble/sampler.h"

namespace {

struct GenerateArgs {
  nibble::cli::ModelFlags m;  // -m, -f and the flags load_options reads (generate has no --block / --sv)
  std::string prompt, tokenizer, sampler = "default", bos = "auto";
  std::string device = "cpu";
  int n = 128, ctx = 0;
  double temp = 0.8, top_p = 0.95, min_p = 0.0;
  int top_k = 0;
  uint64_t seed = 0;
  bool seed_given = false;
  nibble::ResetParams reset;
};

// "auto": llama2.c / SentencePiece models start with BOS; a Hugging Face tokenizer.json only when
// its tokenizer_config.json says add_bos_token (byte-level BPE models such as SmolLM2 do not).
bool use_bos(const GenerateArgs& a) {
  if (a.bos == "yes") return true;
  if (a.bos == "no") return false;
  const std::filesystem::path dir = a.m.model;
  if (!std::filesystem::is_directory(dir) || !std::filesystem::exists(dir / "tokenizer.json"))
    return true;
  std::ifstream f(dir / "tokenizer_config.json");
  if (!f) return false;
  const auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("add_bos_token", false);
}

bool ends_in_partial_utf8(const std::string& s) {
  // walk back over continuation bytes to the lead byte of the last sequence
  size_t i = s.size(), cont = 0;
  while (i > 0 && cont < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++cont;
  if (i == 0) return cont > 0;
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  const size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
  return cont < need;
}

// Whether the tokenizer has id: a model's vocabulary may run past it (padding, random weights).
bool in_tokenizer(const nibble::Tokenizer& tok, int32_t id) { return id >= 0 && id < tok.vocab_size(); }

// Prints generated text as it grows. Decoding is done over a short window of recent ids (so
// tokenizers that treat the first token or byte pieces specially decode as in the full text),
// and output is held back while the text ends inside a UTF-8 sequence or in U+FFFD.
class TextStreamer {
 public:
  TextStreamer(const nibble::Tokenizer& tok, std::vector<int32_t> prompt)
      : tok_(tok), ids_(std::move(prompt)) {
    read_ = ids_.size();
    prefix_ = read_ > 4 ? read_ - 4 : 0;
  }

  void push(int32_t id) {
    if (!in_tokenizer(tok_, id)) {  // a model row past the tokenizer (padding, random weights)
      if (!warned_)
        std::fprintf(stderr, "\nnote: token id %d is outside the tokenizer's %d ids: such tokens print nothing\n", id,
                     tok_.vocab_size());
      warned_ = true;
      return;
    }
    ids_.push_back(id);
    const std::string prefix_text = decode(prefix_, read_);
    const std::string text = decode(prefix_, ids_.size());
    const bool held = text.size() <= prefix_text.size() || ends_in_partial_utf8(text) ||
                      text.ends_with("\xEF\xBF\xBD") || !text.starts_with(prefix_text);
    if (held) return;
    std::fwrite(text.data() + prefix_text.size(), 1, text.size() - prefix_text.size(), stdout);
    std::fflush(stdout);
    prefix_ = read_;
    read_ = ids_.size();
  }

  // Prints whatever is still held back (a trailing partial sequence, as is).
  void finish() {
    const std::string prefix_text = decode(prefix_, read_);
    const std::string text = decode(prefix_, ids_.size());
    if (text.size() > prefix_text.size() && text.starts_with(prefix_text))
      std::fwrite(text.data() + prefix_text.size(), 1, text.size() - prefix_text.size(), stdout);
  }

 private:
  std::string decode(size_t from, size_t to) const {
    return tok_.decode(std::vector<int32_t>(ids_.begin() + ptrdiff_t(from), ids_.begin() + ptrdiff_t(to)));
  }

  const nibble::Tokenizer& tok_;
  std::vector<int32_t> ids_;
  size_t prefix_ = 0, read_ = 0;
  bool warned_ = false;
};

nibble::SamplerConfig sampler_config(const GenerateArgs& a) {
  nibble::SamplerConfig cfg;
  if (a.sampler == "greedy") cfg.kind = nibble::SamplerKind::Greedy;
  else if (a.sampler == "reset") cfg.kind = nibble::SamplerKind::Reset;
  cfg.temperature = a.temp;
  cfg.top_k = a.top_k;
  cfg.top_p = a.top_p;
  cfg.min_p = a.min_p;
  cfg.reset = a.reset;
  cfg.reset.top_p = a.top_p;
  std::random_device rd;
  cfg.seed = a.seed_given ? a.seed : (uint64_t(rd()) << 32) ^ rd();
  nibble::validate(cfg);
  return cfg;
}

// The model and the sampler of one generated sequence: prefill() the prompt, then per token
// pick() the next one from the last logits and feed() it back.
class Generator {
 public:
  virtual ~Generator() = default;
  virtual void prefill(std::span<const int32_t> prompt) = 0;
  virtual int32_t pick() = 0;
  virtual void feed(int32_t id) = 0;
  virtual int position() const = 0;
  virtual int max_context() const = 0;
};

class CpuGenerator final : public Generator {
 public:
  CpuGenerator(const nibble::Model& m, int ctx, const nibble::SamplerConfig& cfg, nibble::TokenTextFn text)
      : session_(m, ctx), sampler_(cfg, std::move(text)), vocab_(m.config().vocab_size) {}
  void prefill(std::span<const int32_t> prompt) override { logits_ = session_.forward(prompt); }
  int32_t pick() override { return sampler_.sample(logits_.data(), vocab_); }
  void feed(int32_t id) override { logits_ = session_.forward(std::span<const int32_t>(&id, 1)); }
  int position() const override { return session_.position(); }
  int max_context() const override { return session_.max_context(); }

 private:
  nibble::Session session_;
  nibble::Sampler sampler_;
  int64_t vocab_;
  std::vector<float> logits_;
};

#ifdef NIBBLE_HAVE_CUDA
// Slot 0 of a one-sequence GPU batch. The uniform draws come from a std::mt19937_64 seeded with
// the same seed, but the device's sampling arithmetic differs from the CPU sampler's, so a seed
// gives the same tokens only on the same device.
class CudaGenerator final : public Generator {
 public:
  CudaGenerator(const nibble::Model& m, int ctx, const nibble::SamplerConfig& cfg, nibble::TokenTextFn text)
      : cfg_(cfg),
        dm_(m, nibble::cuda::DeviceModelOptions{true}),
        batch_(dm_, {1, ctx, true, nibble::cuda::kv_type(m.options().kv_cache)}),
        rng_(cfg.seed) {
    nibble::validate(cfg);
    if (cfg.kind == nibble::SamplerKind::Reset) reset_.emplace(cfg.reset, std::move(text));
  }
  void prefill(std::span<const int32_t> prompt) override { batch_.prefill(0, prompt); }
  int32_t pick() override {
    using nibble::SamplerKind;
    if (cfg_.kind == SamplerKind::Reset) {  // the rule on the device: no round trip before the draw
      const nibble::cuda::EntropyRule rule = nibble::cuda::entropy_rule(*reset_, uniform());
      std::vector<float> entropy;
      const int32_t id = batch_.sample_by_entropy(std::span(&rule, 1), &entropy)[0];
      reset_->decide_entropy(entropy[0]);
      reset_->accept(id);
      return id;
    }
    if (cfg_.kind == SamplerKind::Greedy || cfg_.temperature <= 0) return on_device({});
    return on_device({float(cfg_.temperature), float(cfg_.top_p), 0, cfg_.top_k, float(cfg_.min_p)});
  }
  void feed(int32_t id) override {
    const int slot = 0;
    batch_.step(std::span<const int>(&slot, 1), std::span<const int32_t>(&id, 1));
  }
  int position() const override { return batch_.position(0); }
  int max_context() const override { return batch_.max_context(); }

 private:
  // 53 random bits -> [0, 1); kept below 1 after the cast to float
  float uniform() { return std::min(float(double(rng_() >> 11) * 0x1p-53), std::nextafter(1.0f, 0.0f)); }
  int32_t on_device(nibble::cuda::SampleParams p) {
    p.u = uniform();
    return batch_.sample(std::span<const nibble::cuda::SampleParams>(&p, 1))[0];
  }

  nibble::SamplerConfig cfg_;
  nibble::cuda::DeviceModel dm_;
  nibble::cuda::Batch batch_;
  std::optional<nibble::ResetController> reset_;
  std::mt19937_64 rng_;
};
#endif

std::unique_ptr<Generator> make_generator(const std::string& device, const nibble::Model& m, int ctx,
                                          const nibble::SamplerConfig& cfg, nibble::TokenTextFn text) {
  nibble::cli::require_device(device);
#ifdef NIBBLE_HAVE_CUDA
  if (device == "cuda") return std::make_unique<CudaGenerator>(m, ctx, cfg, std::move(text));
#endif
  return std::make_unique<CpuGenerator>(m, ctx, cfg, std::move(text));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run_generate(const GenerateArgs& a) {
  nibble::cli::require_device(a.device);
  const nibble::SamplerConfig scfg = sampler_config(a);
  nibble::LoadOptions lo = nibble::cli::load_options(a.m);
  lo.tokenizer = a.tokenizer;
  auto model = nibble::Model::load(a.m.model, lo);
  const nibble::Tokenizer& tok = model->tokenizer();

  std::vector<int32_t> prompt;
  if (use_bos(a)) {
    if (tok.bos_id() < 0) throw nibble::Error("--bos: the tokenizer of " + a.m.model + " has no BOS token");
    prompt.push_back(tok.bos_id());
  }
  for (int32_t id : tok.encode(a.prompt)) prompt.push_back(id);
  if (prompt.empty()) throw nibble::Error("-p: the prompt is empty and no BOS token is added");
  const int ctx = a.ctx > 0 ? a.ctx : model->config().max_positions;
  if (int64_t(prompt.size()) > ctx)
    throw nibble::Error("-p: the prompt is " + std::to_string(prompt.size()) +
                        " tokens, longer than the model context of " + std::to_string(ctx) +
                        " tokens");
  if (scfg.kind != nibble::SamplerKind::Greedy)
    std::fprintf(stderr, "seed: %llu\n", static_cast<unsigned long long>(scfg.seed));

  const std::unique_ptr<Generator> gen =
      make_generator(a.device, *model, ctx, scfg,
                     [&tok](int32_t id) { return in_tokenizer(tok, id) ? tok.token_text(id) : std::string(); });
  TextStreamer out(tok, prompt);
  std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
  std::fflush(stdout);

  const int32_t eos = tok.eos_id() >= 0 ? tok.eos_id() : model->config().eos_token_id;
  auto t0 = std::chrono::steady_clock::now();
  gen->prefill(prompt);
  const double prompt_s = seconds_since(t0);

  int generated = 0, decode_steps = 0;
  bool context_full = false;
  t0 = std::chrono::steady_clock::now();
  while (generated < a.n) {
    const int32_t id = gen->pick();
    if (id == eos) break;
    out.push(id);
    if (++generated == a.n) break;
    if (gen->position() >= gen->max_context()) {
      context_full = true;
      break;
    }
    gen->feed(id);
    ++decode_steps;
  }
  const double decode_s = seconds_since(t0);
  out.finish();
  std::printf("\n");
  std::fflush(stdout);
  if (context_full) std::fprintf(stderr, "stopped: the context of %d tokens is full\n", ctx);
  std::fprintf(stderr, "prompt: %zu tokens, %.2f tokens/s\n", prompt.size(),
               double(prompt.size()) / prompt_s);
  // each decode step = sampling one token + one forward pass of it
  if (decode_steps > 0)
    std::fprintf(stderr, "generation: %d tokens, %.2f tokens/s\n", generated, decode_steps / decode_s);
  else
    std::fprintf(stderr, "generation: %d tokens\n", generated);
}

void setup_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt (streams to stdout)");
  cmd->add_option("-m,--model", a->m.model, "HF model directory or llama2.c .bin checkpoint")->required();
  cmd->add_option("-p,--prompt", a->prompt, "prompt text");
  cmd->add_option("-n", a->n, "maximum number of tokens to generate")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--sampler", a->sampler, "token sampler")->capture_default_str()
      ->check(CLI::IsMember({"default", "greedy", "reset"}));
  cmd->add_option("--temp", a->temp, "temperature of the default sampler (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "keep the k most likely tokens (0: off)")->capture_default_str();
  cmd->add_option("--top-p", a->top_p, "nucleus mass to keep (1: off); also ReSET's")
      ->capture_default_str();
  cmd->add_option("--min-p", a->min_p, "drop tokens below min-p x the top probability (0: off)")
      ->capture_default_str();
  cmd->add_option_function<uint64_t>(
      "--seed", [a](uint64_t s) { a->seed = s, a->seed_given = true; },
      "RNG seed (std::mt19937_64): the same seed gives the same tokens with the same build and "
      "model; default: random, printed to stderr");
  cmd->add_option("--t-low", a->reset.t_low, "ReSET sharpening temperature")->capture_default_str();
  cmd->add_option("--t-high", a->reset.t_high, "ReSET high-entropy temperature")->capture_default_str();
  cmd->add_option("--tau0", a->reset.tau0, "ReSET global entropy threshold (nats)")->capture_default_str();
  cmd->add_option("--window", a->reset.window, "ReSET step-entropy window w")->capture_default_str();
  cmd->add_option("-f,--format", a->m.format, "quantize the linear weights to this format");
  nibble::cli::add_extent_flags(cmd, a->m);
  cmd->add_option("--act-format", a->m.act_format, "quantize activations online with this format");
  nibble::cli::add_kv_flag(cmd, a->m.kv_cache);
  nibble::cli::add_device_flag(cmd, a->device);
  cmd->add_option("--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (default: beside the checkpoint)");
  cmd->add_option("--ctx", a->ctx, "context length (default: the model's maximum positions)");
  cmd->add_option("--bos", a->bos, "prepend BOS: auto (llama2.c/SentencePiece yes, HF per "
                  "tokenizer_config.json), yes, no")
      ->capture_default_str()->check(CLI::IsMember({"auto", "yes", "no"}));
  cmd->add_flag_callback("--no-bos", [a] { a->bos = "no"; }, "same as --bos no");
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace

NIBBLE_COMMAND(setup_generate);

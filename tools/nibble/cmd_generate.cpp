// nibble generate: text generation from a prompt, streamed to stdout token by token, with the
// samplers of nibble/sampler.h (default: temperature + top-k/top-p/min-p; greedy; ReSET).
// Timing goes to stderr at the end.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "nibble/error.h"
#include "nibble/model.h"
#include "nibble/sampler.h"

namespace {

struct GenerateArgs {
  std::string model, prompt, tokenizer, weight_format, act_format, sampler = "default", bos = "auto";
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
  const std::filesystem::path dir = a.model;
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run_generate(const GenerateArgs& a) {
  const nibble::SamplerConfig scfg = sampler_config(a);
  nibble::LoadOptions lo;
  lo.weight_format = a.weight_format;
  lo.act_format = a.act_format;
  lo.tokenizer = a.tokenizer;
  lo.progress = true;
  auto model = nibble::Model::load(a.model, lo);
  const nibble::Tokenizer& tok = model->tokenizer();

  std::vector<int32_t> prompt;
  if (use_bos(a)) {
    if (tok.bos_id() < 0) throw nibble::Error("--bos: the tokenizer of " + a.model + " has no BOS token");
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

  nibble::Session session(*model, ctx);
  nibble::Sampler sampler(scfg, [&tok](int32_t id) { return tok.token_text(id); });
  TextStreamer out(tok, prompt);
  std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
  std::fflush(stdout);

  const int32_t eos = tok.eos_id() >= 0 ? tok.eos_id() : model->config().eos_token_id;
  const int64_t vocab = model->config().vocab_size;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits = session.forward(prompt);
  const double prompt_s = seconds_since(t0);

  int generated = 0, decode_steps = 0;
  bool context_full = false;
  t0 = std::chrono::steady_clock::now();
  while (generated < a.n) {
    const int32_t id = sampler.sample(logits.data(), vocab);
    if (id == eos) break;
    out.push(id);
    if (++generated == a.n) break;
    if (session.position() >= session.max_context()) {
      context_full = true;
      break;
    }
    logits = session.forward(std::span<const int32_t>(&id, 1));
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
  cmd->add_option("-m,--model", a->model, "HF model directory or llama2.c .bin checkpoint")->required();
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
  cmd->add_option("-f,--format", a->weight_format, "quantize the linear weights to this format");
  cmd->add_option("--act-format", a->act_format, "quantize activations online with this format");
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

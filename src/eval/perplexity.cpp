// Perplexity by the protocol of ../shared/data/README.md.
#include "nibble/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "nibble/error.h"
#include "nibble/progress.h"

namespace nibble {
namespace {

constexpr int64_t kChunk = 256;  // prefill chunk: bounds the logits buffer to kChunk x vocab

// -log softmax(logits)[target]; exponentials in float (as a float32 log_softmax), summed in double.
double token_nll(const float* logits, int64_t V, int32_t target) {
  float mx = logits[0];
  for (int64_t i = 1; i < V; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += std::exp(logits[i] - mx);
  return std::log(sum) + mx - double(logits[target]);
}

// Sum of NLL of tokens 1..n-1 of one window, evaluated from an empty cache.
double window_nll(Sequence& s, std::span<const int32_t> win) {
  s.reset();
  const int64_t n = int64_t(win.size());
  double nll = 0;
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n - c0);
    const std::vector<float> logits = s.forward(win.subspan(size_t(c0), size_t(len)), true);
    const int64_t V = int64_t(logits.size()) / len;
    const int64_t scored = std::min(len, n - 1 - c0);  // logits at pos predict token pos + 1
    for (int64_t i = 0; i < scored; ++i) {
      const int32_t target = win[size_t(c0 + i + 1)];
      if (target < 0 || target >= V)
        throw Error("perplexity: token id " + std::to_string(target) + " outside the vocabulary");
    }
    double chunk = 0;
#pragma omp parallel for reduction(+ : chunk) schedule(static)
    for (int64_t i = 0; i < scored; ++i)
      chunk += token_nll(logits.data() + i * V, V, win[size_t(c0 + i + 1)]);
    nll += chunk;
  }
  return nll;
}

}  // namespace

int default_ppl_context(const ModelConfig& cfg) {
  return std::max(2, std::min(2048, cfg.max_positions / 2));
}

PerplexityResult perplexity(const Model& m, std::span<const int32_t> ids,
                            const PerplexityOptions& opt) {
  PerplexityResult r;
  r.ctx = opt.ctx > 0 ? opt.ctx : default_ppl_context(m.config());
  if (r.ctx < 2) throw Error("perplexity: ctx must be at least 2, got " + std::to_string(r.ctx));
  r.total_tokens = int64_t(ids.size());
  int64_t n = r.total_tokens / r.ctx;
  if (opt.max_windows > 0) n = std::min<int64_t>(n, opt.max_windows);
  if (n == 0)
    throw Error("perplexity: the text has " + std::to_string(ids.size()) +
                " tokens, fewer than one window of " + std::to_string(r.ctx));
  r.windows = int(n);
  r.scored_tokens = n * (r.ctx - 1);
  std::unique_ptr<Sequence> seq =
      opt.make_sequence ? opt.make_sequence(r.ctx) : std::make_unique<Session>(m, r.ctx);
  Progress bar("ppl", n);
  if (!opt.progress) bar.finish();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t w = 0; w < n; ++w) {
    r.nll_sum += window_nll(*seq, ids.subspan(size_t(w * r.ctx), size_t(r.ctx)));
    bar.add();
  }
  bar.finish();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.tokens_per_second = r.seconds > 0 ? double(n * r.ctx) / r.seconds : 0;
  r.ppl = std::exp(r.nll_sum / double(r.scored_tokens));
  return r;
}

PerplexityResult perplexity_of_file(const Model& m, const std::filesystem::path& text,
                                    const PerplexityOptions& opt) {
  std::ifstream f(text, std::ios::binary);
  if (!f) throw Error(text.string() + ": cannot open text file");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::vector<int32_t> ids = m.tokenizer().encode(ss.str());
  return perplexity(m, ids, opt);
}

}  // namespace nibble

#pragma once
// Choosing the next token from raw logits: greedy, temperature with top-k / top-p / min-p, and
// ReSET, the step-aware entropy temperature rule of ../shared/RESET.md (paper 002, Sec. 4).
//
// Randomness comes from one std::mt19937_64 seeded with SamplerConfig::seed, turned into a
// uniform double by nibble's own arithmetic (not std::uniform_real_distribution), so a given seed
// reproduces the same tokens for the same build and the same logits.
//
// Order of the default sampler: softmax(z / T), then top-k, top-p, min-p, each renormalizing what
// it keeps. Ranking ties (equal probabilities) go to the lower token id.
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace nibble {

// Entropy in nats of softmax(logits) at temperature 1 over all n entries (float64 inside).
// -inf logits are allowed (probability 0); NaN / +inf, or no finite logit, throw nibble::Error.
double entropy_nats(const float* logits, int64_t n);

// Index of the largest logit (the lowest index on ties). NaN throws nibble::Error.
int32_t argmax(const float* logits, int64_t n);

// A token and its probability, as the filters pass them along.
struct Candidate {
  int32_t id;
  double prob;
};

// softmax(logits / temperature) over every entry, in id order (temperature > 0).
std::vector<Candidate> softmax_candidates(const float* logits, int64_t n, double temperature);

// Filters. Each keeps a subset (in no particular order; linear time, no full sort) and
// renormalizes it to sum to 1. Each is a no-op at its neutral value (k <= 0, p >= 1, p <= 0).
// The ranking they cut is by probability descending, ties to the lower id.
void keep_top_k(std::vector<Candidate>& c, int k);
// The smallest prefix of the ranking whose probability mass reaches p (at least one token).
void keep_top_p(std::vector<Candidate>& c, double p);
// Every token whose probability is at least p times the largest one.
void keep_min_p(std::vector<Candidate>& c, double p);

// Draws one candidate with probability proportional to its prob, from one rng() call.
int32_t draw(const std::vector<Candidate>& c, std::mt19937_64& rng);

// ReSET parameters; defaults are RESET.md's.
struct ResetParams {
  double t_low = 0.1;     // sharpening temperature
  double t_high = 1.0;    // temperature for high-entropy positions
  double tau0 = 0.6349;   // global entropy threshold (nats), for confident steps
  int window = 32;        // w of the hybrid step-entropy estimator
  double top_p = 0.95;    // applied after the temperature
};

// Throws nibble::Error naming the parameter when one is out of range.
void validate(const ResetParams& params);

// The text a token contributes when decoded (Tokenizer::token_text); ReSET finds step boundaries
// in it.
using TokenTextFn = std::function<std::string(int32_t)>;

// What ReSET decided for one token, with the signals it used.
struct ResetDecision {
  double entropy = 0;      // H_t
  double h_step = 0;       // hybrid step-entropy estimate
  double h_bar = 0;        // mean entropy of the previous tokens
  bool uncertain_step = false;  // h_step > h_bar
  double temperature = 0;  // T_low or T_high
};

// The ReSET rule for one sequence of generated tokens. Per token: decide() from its logits, then
// accept() the token chosen. Bookkeeping is O(1) per token (running sums, a ring buffer of the
// last w entropies); the entropy is one pass over the logits.
class ResetController {
 public:
  // Throws nibble::Error on a parameter out of range or a missing token_text.
  ResetController(const ResetParams& params, TokenTextFn token_text);

  ResetDecision decide(const float* logits, int64_t n);  // decide_entropy(entropy_nats(logits, n))
  // decide() for an entropy H_t already computed (e.g. on the GPU); throws nibble::Error when it
  // is negative or not finite.
  ResetDecision decide_entropy(double entropy);
  // The threshold the next decide compares H_t against (tau0 in a confident step, the step entropy
  // in an uncertain one): known before H_t, so a GPU can apply the rule itself (temperature =
  // t_high when H_t >= it, else t_low) and decide_entropy(H_t) then returns that same choice.
  double next_threshold() const;
  void accept(int32_t token);
  int64_t position() const { return t_; }  // index t of the next token to decide
  const ResetParams& params() const { return p_; }

 private:
  bool ends_step(int32_t token);  // does token t end its step (token t+1 starts a new one)?
  // h_step and h_bar of the next token (t > 0).
  std::pair<double, double> step_signals() const;

  ResetParams p_;
  TokenTextFn text_;
  int64_t t_ = 0;
  std::vector<double> ring_;        // H of the last w tokens, slot t % w
  double total_sum_ = 0;            // H_0 + ... + H_{t-1}
  double window_sum_ = 0;           // sum of the ring's live slots
  double step_sum_ = 0;             // H_{t0} + ... + H_{t-1}
  int64_t step_n_ = 0;              // n = t - t0
  bool prev_was_newline_ = false;   // token t-1 decoded to exactly "\n"
  std::optional<double> pending_;   // H_t between decide() and accept()
};

enum class SamplerKind { Default, Greedy, Reset };

struct SamplerConfig {
  SamplerKind kind = SamplerKind::Default;
  double temperature = 1.0;  // Default only; 0 means greedy
  int top_k = 0;             // Default only; 0: off
  double top_p = 1.0;        // Default only; 1: off
  double min_p = 0.0;        // Default only; 0: off
  uint64_t seed = 0;
  ResetParams reset;
};

// Throws nibble::Error naming the field when a value is out of range (ReSET's too, for kind Reset).
void validate(const SamplerConfig& cfg);

// One sampler per generated sequence (ReSET keeps per-sequence state).
class Sampler {
 public:
  // token_text is needed by ReSET only.
  explicit Sampler(const SamplerConfig& cfg, TokenTextFn token_text = {});

  int32_t sample(const float* logits, int64_t n);
  // ReSET's decision for the token sampled last (empty for the other kinds).
  const std::optional<ResetDecision>& last_reset_decision() const { return last_; }

 private:
  int32_t sample_tempered(const float* logits, int64_t n, double temperature, int top_k,
                          double top_p, double min_p);

  SamplerConfig cfg_;
  std::mt19937_64 rng_;
  std::optional<ResetController> reset_;
  std::optional<ResetDecision> last_;
};

}  // namespace nibble

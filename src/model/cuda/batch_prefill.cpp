// Batch::prefill / prefill_nll: a slot's tokens appended in chunks of kPrefillChunk.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "model/cuda/batch_impl.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

// Checks a prefill of n tokens into slot s like Session::forward does.
void check_prefill(const Batch::Impl& b, int s, std::span<const int32_t> tokens, const char* what) {
  b.check_slot(s, what);
  const int p = b.positions[size_t(s)];
  if (int64_t(p) + int64_t(tokens.size()) > b.max_ctx)
    throw Error(fmt::format("context overflow: position {} + {} tokens exceeds the batch's max context {} (slot {})",
                            p, tokens.size(), b.max_ctx, s));
  b.check_tokens(tokens, what);
}

// Runs one chunk of `len` tokens of slot s at its current position; logits of the last n_out.
void run_chunk(Batch::Impl& b, int s, std::span<const int32_t> chunk, int n_out) {
  const int len = int(chunk.size()), p = b.positions[size_t(s)];
  std::vector<int32_t> slots(chunk.size(), s), pos(chunk.size());
  std::iota(pos.begin(), pos.end(), p);
  b.upload_rows(chunk, slots, pos);
  b.forward(len, false, s, p, n_out, b.prefill_ws);
  b.positions[size_t(s)] += len;
}

}  // namespace

std::vector<float> Batch::prefill(int slot, std::span<const int32_t> tokens, bool all_logits) {
  Impl& b = *p_;
  check_prefill(b, slot, tokens, "Batch::prefill");
  b.last_rows = 0;
  const int64_t n = int64_t(tokens.size()), V = b.m.vocab;
  std::vector<float> out(size_t((all_logits ? n : std::min<int64_t>(n, 1)) * V));
  for (int64_t c0 = 0; c0 < n; c0 += kPrefillChunk) {
    const int len = int(std::min<int64_t>(kPrefillChunk, n - c0));
    const bool last = c0 + len == n;
    const int n_out = all_logits ? len : (last ? 1 : 0);
    run_chunk(b, slot, tokens.subspan(size_t(c0), size_t(len)), n_out);
    if (n_out)
      b.copy_to_host(out.data() + (all_logits ? c0 * V : 0), b.logits.get(), size_t(n_out) * V * sizeof(float));
  }
  // The last token's logits count as a step of one row, for sample() / entropies() / logits().
  if (n > 0 && !all_logits) b.last_rows = 1;
  return out;
}

std::vector<float> Batch::prefill_nll(int slot, std::span<const int32_t> tokens) {
  Impl& b = *p_;
  check_prefill(b, slot, tokens, "Batch::prefill_nll");
  b.last_rows = 0;
  const int64_t n = int64_t(tokens.size());
  std::vector<float> nll(size_t(std::max<int64_t>(n - 1, 0)));
  for (int64_t c0 = 0; c0 < n; c0 += kPrefillChunk) {
    const int len = int(std::min<int64_t>(kPrefillChunk, n - c0));
    const int scored = int(std::min<int64_t>(len, n - 1 - c0));  // logits at i predict token i + 1
    run_chunk(b, slot, tokens.subspan(size_t(c0), size_t(len)), scored > 0 ? len : 0);
    if (scored <= 0) continue;
    NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b.targets.get(), tokens.data() + c0 + 1, size_t(scored) * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, b.stream));
    ops::token_nll(b.logits.get(), scored, int(b.m.vocab), b.targets.get(), b.nll.get(), b.stream);
    b.copy_to_host(nll.data() + c0, b.nll.get(), size_t(scored) * sizeof(float));
  }
  return nll;
}

}  // namespace nibble::cuda

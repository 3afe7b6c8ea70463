#pragma once
// One sequence's incremental forward pass, whatever runs it: nibble::Session on the CPU, or one
// slot of a CUDA batch (nibble/cuda/runtime.h). Perplexity and generation take this interface so
// `--device` only changes which one is made.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace nibble {

class Sequence {
 public:
  virtual ~Sequence() = default;
  // Appends tokens and returns float logits [n_out x vocab] on the host: for the last token only,
  // or for every given token when all_logits. Throws nibble::Error when the context would
  // overflow or a token id is out of range.
  virtual std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits = false) = 0;
  virtual int position() const = 0;
  virtual int max_context() const = 0;
  virtual void reset() = 0;  // empty the cache (position 0)
};

// Makes a Sequence able to hold max_context tokens.
using SequenceFactory = std::function<std::unique_ptr<Sequence>(int max_context)>;

}  // namespace nibble

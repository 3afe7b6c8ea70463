#pragma once
// Internals of init_random: the tensors a config implies, their random fill, and the streaming
// sharded safetensors writer (the whole model never sits in memory).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "nibble/safetensors.h"

namespace nibble::init_random_detail {

enum class Spread { linear, norm, embedding };

struct RandomTensor {
  std::string name;
  std::vector<int64_t> shape;
  Spread spread = Spread::linear;
  int64_t numel() const;
};

// Elements per independent random stream.
inline constexpr int64_t kChunk = int64_t(1) << 16;

// Writes elements [first, first + n) of tensor t (first a multiple of kChunk) as dtype into out,
// from the streams of (seed, t.name); OpenMP over chunks.
void fill_random(const RandomTensor& t, uint64_t seed, int64_t first, int64_t n, DType dtype, uint8_t* out);

// Writes the tensors as shards of at most max_shard_bytes (one tensor per shard when larger)
// named model-0000i-of-0000n.safetensors, plus model.safetensors.index.json when n > 1 (else one
// model.safetensors). `on_bytes` is told the data bytes written so far.
struct ShardResult {
  int shards = 0;
  uint64_t bytes = 0;
};
ShardResult write_random_shards(const std::filesystem::path& dir, const std::vector<RandomTensor>& tensors,
                                uint64_t seed, DType dtype, uint64_t max_shard_bytes,
                                const std::function<void(uint64_t)>& on_bytes);

}  // namespace nibble::init_random_detail

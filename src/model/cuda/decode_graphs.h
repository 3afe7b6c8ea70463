#pragma once
// CUDA graphs of decode steps, one per key: the batch size B and attention's position bucket (its
// grid depends on it). A step's kernels read their per-row inputs (token ids, slots, positions)
// from fixed device buffers, so one capture serves every later step with the same key.
#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

namespace nibble::cuda {

class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  using Key = std::pair<int, int>;  // (rows B, attention's max_pos_hint)

  // Runs one step of B rows on `stream`: replays the key's graph, or, the first time (and whenever
  // `scratch()` changed, i.e. a workspace the kernels write was reallocated), runs `enqueue`
  // directly (the warm-up: buffers that grow on first use grow outside any capture) and then
  // captures it for the next time.
  void run(Key key, const std::function<void()>& enqueue, const std::function<std::vector<const void*>()>& scratch,
           cudaStream_t stream);
  void clear();

 private:
  std::map<Key, cudaGraphExec_t> exec_;
  std::vector<const void*> scratch_;
};

}  // namespace nibble::cuda

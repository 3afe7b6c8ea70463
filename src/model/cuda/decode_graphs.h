#pragma once
// CUDA graphs of decode steps, one per batch size B. A step's kernels read their per-row inputs
// (token ids, slots, positions) from fixed device buffers, so one capture serves every later
// step of the same B.
#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <vector>

namespace nibble::cuda {

class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Runs one step of B rows on `stream`: replays B's graph, or, the first time (and whenever
  // `scratch()` changed, i.e. a workspace the kernels write was reallocated), runs `enqueue`
  // directly (the warm-up: buffers that grow on first use grow outside any capture) and then
  // captures it for the next time.
  void run(int B, const std::function<void()>& enqueue, const std::function<std::vector<const void*>()>& scratch,
           cudaStream_t stream);
  void clear();

 private:
  std::map<int, cudaGraphExec_t> exec_;
  std::vector<const void*> scratch_;
};

}  // namespace nibble::cuda

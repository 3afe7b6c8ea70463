#pragma once
// Op-by-op timing of one forward pass (Batch::profile_step): the stream is held on the host until
// the whole pass is queued, so the events between ops time the kernels back to back, not the CPU's
// launches. Without graphs, so each launch still carries its stream-launch gap (~1-2 us more per
// kernel than a graph replay).
#include <cuda_runtime_api.h>

#include <atomic>
#include <string>
#include <vector>

#include "nibble/cuda/runtime.h"

namespace nibble::cuda {

class StepProfiler {
 public:
  explicit StepProfiler(cudaStream_t stream);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void mark(const char* op);  // the ops queued since the last mark are `op`
  // Releases the stream, waits, and sums the time per op name (first-seen order).
  std::vector<OpTime> finish();

 private:
  cudaStream_t stream_;
  std::atomic<bool> queued_{false};
  cudaEvent_t start_ = nullptr;
  std::vector<std::pair<std::string, cudaEvent_t>> marks_;
};

}  // namespace nibble::cuda

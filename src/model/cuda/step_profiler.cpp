#include "model/cuda/step_profiler.h"

#include <algorithm>
#include <thread>

#include "nibble/cuda/check.h"

namespace nibble::cuda {
namespace {

// A host function in the stream that returns once everything after it is queued.
void CUDART_CB hold(void* flag) {
  auto* queued = static_cast<std::atomic<bool>*>(flag);
  while (!queued->load(std::memory_order_acquire)) std::this_thread::yield();
}

}  // namespace

StepProfiler::StepProfiler(cudaStream_t stream) : stream_(stream) {
  NIBBLE_CUDA_CHECK(cudaLaunchHostFunc(stream_, hold, &queued_));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&start_));
  NIBBLE_CUDA_CHECK(cudaEventRecord(start_, stream_));
}

StepProfiler::~StepProfiler() {
  queued_.store(true, std::memory_order_release);  // never leave the stream held
  cudaStreamSynchronize(stream_);
  cudaEventDestroy(start_);
  for (auto& [op, e] : marks_) cudaEventDestroy(e);
}

void StepProfiler::mark(const char* op) {
  cudaEvent_t e = nullptr;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e));
  marks_.emplace_back(op, e);
  NIBBLE_CUDA_CHECK(cudaEventRecord(e, stream_));
}

std::vector<OpTime> StepProfiler::finish() {
  queued_.store(true, std::memory_order_release);
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<OpTime> out;
  cudaEvent_t prev = start_;
  for (auto& [op, e] : marks_) {
    float ms = 0;
    NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, prev, e));
    prev = e;
    auto it = std::find_if(out.begin(), out.end(), [&](const OpTime& t) { return t.op == op; });
    if (it == out.end()) it = out.insert(out.end(), OpTime{op, 0, 0.0});
    ++it->calls;
    it->us += 1000.0 * ms;
  }
  return out;
}

}  // namespace nibble::cuda

#include "model/cuda/decode_graphs.h"

#include "nibble/cuda/check.h"

namespace nibble::cuda {

DecodeGraphs::~DecodeGraphs() { clear(); }

void DecodeGraphs::clear() {
  for (auto& [key, e] : exec_) cudaGraphExecDestroy(e);
  exec_.clear();
}

void DecodeGraphs::run(Key key, const std::function<void()>& enqueue,
                       const std::function<std::vector<const void*>()>& scratch, cudaStream_t stream) {
  auto refresh = [&] {
    std::vector<const void*> now = scratch();
    if (now != scratch_) {  // graphs captured with the old pointers would write freed memory
      clear();
      scratch_ = std::move(now);
    }
  };
  refresh();
  if (auto it = exec_.find(key); it != exec_.end()) {
    NIBBLE_CUDA_CHECK(cudaGraphLaunch(it->second, stream));
    return;
  }
  enqueue();
  refresh();
  NIBBLE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(stream, &broken);
    if (broken) cudaGraphDestroy(broken);
    cudaGetLastError();  // clear the capture's error so the stream stays usable
    throw;
  }
  cudaGraph_t graph = nullptr;
  NIBBLE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  NIBBLE_CUDA_CHECK(e);
  exec_[key] = exec;
}

}  // namespace nibble::cuda

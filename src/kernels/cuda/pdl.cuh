#pragma once
// Programmatic dependent launch (Hopper): a kernel started with launch_pdl may be scheduled while
// the kernel before it in the stream is still finishing, which hides most of the ~2 us launch gap
// between the small back-to-back kernels of a decode step. Every kernel launched this way calls
// pdl_wait() before it touches memory (it returns once the previous kernel has completed and its
// writes are visible) and pdl_trigger() to let the next kernel start launching. Both are no-ops
// when the kernel was launched normally or on GPUs before sm_90. NIBBLE_CUDA_PDL=0 turns the
// launch attribute off (for comparison).
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "nibble/cuda/check.h"

namespace nibble::cuda::detail {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

inline bool pdl_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("NIBBLE_CUDA_PDL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization allowed;
// cluster > 1: in clusters of that many CTAs along x (sm_90; grid.x a multiple of it).
template <class... KArgs, class... Args>
void launch_pdl_cluster(unsigned cluster, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                        cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cudaLaunchAttribute attrs[2]{};
  unsigned n = 0;
  if (pdl_enabled()) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n++].val.clusterDim = {cluster, 1, 1};
  }
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  NIBBLE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <class... KArgs, class... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  launch_pdl_cluster(1, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace nibble::cuda::detail

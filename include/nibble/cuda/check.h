#pragma once
// CUDA error checks that throw nibble::Error naming the call and where it was made.
#include <cuda_runtime_api.h>

#include <string>

#include "nibble/error.h"

namespace nibble::cuda {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* what, const char* file, int line) {
  throw Error(std::string("CUDA error in ") + what + " (" + file + ":" + std::to_string(line) +
              "): " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

}  // namespace nibble::cuda

#define NIBBLE_CUDA_CHECK(call)                                                       \
  do {                                                                                \
    cudaError_t nibble_err_ = (call);                                                 \
    if (nibble_err_ != cudaSuccess) ::nibble::cuda::throw_cuda(nibble_err_, #call, __FILE__, __LINE__); \
  } while (0)

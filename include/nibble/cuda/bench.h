#pragma once
// Measurement helpers shared by `nibble bench kernels` and `nibble tune`: random packed weights
// of a given shape (valid codes and scales, no quantizer run), CUDA-graph replay timing with the
// inputs rotated over several copies (to defeat the L2), and the device copy bandwidth.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <ctime>
#include <functional>
#include <string>
#include <string_view>

#include "nibble/cuda/check.h"
#include "nibble/format.h"

namespace nibble::cuda {

// A PackedTensor of `format` [N, K] in the serialized layout, random codes (every code value,
// special values included) and random in-range scales. Throws nibble::Error for formats without
// a CUDA kernel.
PackedTensor random_packed(std::string_view format, int64_t N, int64_t K, uint64_t seed);

// Times launch(copy) for copy = 0, 1, ..., copies - 1, 0, ... captured in one CUDA graph of at
// least `launches` launches, replayed `replays` times after warm-up; returns the median
// microseconds per launch. Falls back to event timing of direct launches when capture fails.
double time_rotated_us(const std::function<void(int copy, cudaStream_t)>& launch, int copies, cudaStream_t stream,
                       int launches = 48, int replays = 15);

// Device-to-device copy bandwidth in GB/s (bytes read + bytes written), cudaMemcpyAsync of a
// `bytes` buffer, median of several runs.
double copy_bandwidth_gbps(size_t bytes, cudaStream_t stream);

// `nibble bench chain` (launch_chain.cu): microseconds per kernel of a graph of `kernels`
// dependent kernels that each stream `bytes` of their own (a multiple of 16, 0 allowed), with
// programmatic dependent launch (first loads before the wait, as the decode GEMVs) and without;
// and the same bytes read by one kernel, per kernel's share. Each kernel launches
// kChainCtasPerSm CTAs per SM.
inline constexpr int kChainCtasPerSm = 4;
struct ChainTiming {
  double pdl_us = 0, plain_us = 0, one_kernel_us = 0;
};
ChainTiming time_stream_chain(size_t bytes, int kernels, cudaStream_t stream);

// The projection shapes both benchmarks run: K x N of the Llama-3.1-8B and Qwen3-32B layers.
struct BenchShape {
  const char* model;
  const char* proj;
  int K, N;
};
inline constexpr BenchShape kBenchShapes[] = {
    {"Llama-3.1-8B", "qkv", 4096, 6144},     {"Llama-3.1-8B", "o", 4096, 4096},
    {"Llama-3.1-8B", "gate_up", 4096, 28672}, {"Llama-3.1-8B", "down", 14336, 4096},
    {"Qwen3-32B", "qkv", 5120, 10240},        {"Qwen3-32B", "o", 8192, 5120},
    {"Qwen3-32B", "gate_up", 5120, 51200},    {"Qwen3-32B", "down", 25600, 5120},
};

// A device buffer of n elements of T, freed when it goes out of scope.
template <class T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(size_t n) { NIBBLE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T))); }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

// Today's UTC date as YYYY-MM-DD, for result rows and file names.
inline std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

// Copies of a buffer of `bytes` needed so that rotating over them moves more than 3x the L2 (and
// over 50 MB): at least 2.
int rotation_copies(size_t bytes);

struct DeviceInfo {
  std::string name;
  int sm_count = 0;
  size_t l2_bytes = 0;
};
DeviceInfo device_info();

}  // namespace nibble::cuda

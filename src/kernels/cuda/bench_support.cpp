#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "nibble/cuda/bench.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/linear.h"
#include "nibble/error.h"
#include "nibble/half.h"

namespace nibble::cuda {
namespace {

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  uint64_t next() { return g(); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) * 0x1p-24f; }
};

void random_bytes(std::vector<uint8_t>& v, size_t n, Rng& r) {
  v.resize(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = r.next();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = uint8_t(r.next());
}

void put_u16(std::vector<uint8_t>& v, size_t i, uint16_t x) { std::memcpy(v.data() + 2 * i, &x, 2); }

}  // namespace

PackedTensor random_packed(std::string_view format, int64_t N, int64_t K, uint64_t seed) {
  if (!has_kernel(format)) throw Error(fmt::format("random_packed: format '{}' has no CUDA kernel", format));
  Rng r(seed);
  PackedTensor t;
  t.format = std::string(format);
  t.rows = N, t.cols = K;
  const size_t n = size_t(N) * size_t(K);
  if (format == "nvfp4" || format == "nvfp4-4over6" || format == "nvfp4-razer") {
    const bool razer = format == "nvfp4-razer";
    t.block = 16;
    random_bytes(t.qweight, n / 2, r);
    t.scales.resize(n / 16);
    // E4M3 codes 0x30..0x4F (about 0.5..4), or E3M3 codes 0x10..0x2F with random sv bits 7..6
    for (auto& b : t.scales) b = razer ? uint8_t(0x10 + r.next() % 32) | uint8_t(r.next() & 0xC0) : uint8_t(0x30 + r.next() % 32);
    t.global_scale = 0.01f;
    if (razer) t.sv_a = 5.0f, t.sv_b = 8.0f;
  } else if (format == "mxfp4") {
    t.block = 32;
    random_bytes(t.qweight, n / 2, r);
    t.scales.resize(n / 32);
    for (auto& b : t.scales) b = uint8_t(120 + r.next() % 8);
  } else if (format == "fp4-g128" || format == "razer-fp4-g128" || format == "razer-fp3-g128") {
    const bool razer = format != "fp4-g128", fp3 = format == "razer-fp3-g128";
    t.block = 128;
    random_bytes(t.qweight, fp3 ? n / 32 * 12 : n / 2, r);
    t.scales.resize(n / 128 * 2);
    for (size_t i = 0; i < n / 128; ++i) {
      uint16_t s = float_to_half(r.uniform(0.01f, 1.5f));
      if (razer) s = uint16_t(s | (r.next() & 0xC000));
      put_u16(t.scales, i, s);
    }
    if (razer) t.sv_a = fp3 ? 3.0f : 5.0f, t.sv_b = fp3 ? 6.0f : 8.0f;
  } else if (format == "int4-g128") {
    t.block = 128;
    random_bytes(t.qweight, n / 2, r);
    const size_t groups = size_t(K) / 128;
    t.scales.resize(size_t(N) * groups * 2);
    for (size_t i = 0; i < size_t(N) * groups; ++i) put_u16(t.scales, i, float_to_half(r.uniform(0.001f, 0.1f)));
    random_bytes(t.aux, size_t(N) * ((groups + 1) / 2), r);
  } else if (format == "nf4") {
    t.block = 64;
    random_bytes(t.qweight, n / 2, r);
    t.scales.resize(n / 64 * 4);
    for (size_t i = 0; i < n / 64; ++i) {
      float a = r.uniform(0.01f, 0.2f);
      std::memcpy(t.scales.data() + 4 * i, &a, 4);
    }
  } else if (format == "fp16") {  // N(0, 0.02)-like spread: uniform in +-0.035
    t.qweight.resize(n * 2);
    for (size_t i = 0; i < n; ++i) put_u16(t.qweight, i, float_to_half(r.uniform(-0.035f, 0.035f)));
  }
  return t;
}

int rotation_copies(size_t bytes) {
  const DeviceInfo d = device_info();
  const size_t target = std::max<size_t>(3 * d.l2_bytes, size_t(150) << 20);
  return int(std::max<size_t>(2, (target + bytes - 1) / std::max<size_t>(bytes, 1)));
}

DeviceInfo device_info() {
  int dev = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  NIBBLE_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  return {p.name, p.multiProcessorCount, size_t(p.l2CacheSize)};
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double time_rotated_us(const std::function<void(int, cudaStream_t)>& launch, int copies, cudaStream_t stream,
                       int launches, int replays) {
  const int L = std::max(launches, copies);
  cudaEvent_t e0, e1;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e0));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < std::min(L, 2 * copies); ++i) launch(i % copies, stream);  // warm-up
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool use_graph = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (use_graph) {
    for (int i = 0; i < L; ++i) launch(i % copies, stream);
    use_graph = cudaStreamEndCapture(stream, &graph) == cudaSuccess &&
                cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  (void)cudaGetLastError();  // a failed capture leaves a sticky-free error behind: clear it
  std::vector<double> per_launch;
  for (int rep = 0; rep < replays + 3; ++rep) {
    NIBBLE_CUDA_CHECK(cudaEventRecord(e0, stream));
    if (use_graph) {
      NIBBLE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    } else {
      for (int i = 0; i < L; ++i) launch(i % copies, stream);
    }
    NIBBLE_CUDA_CHECK(cudaEventRecord(e1, stream));
    NIBBLE_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep >= 3) per_launch.push_back(1000.0 * ms / L);
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
  return median(per_launch);
}

double copy_bandwidth_gbps(size_t bytes, cudaStream_t stream) {
  void *a = nullptr, *b = nullptr;
  NIBBLE_CUDA_CHECK(cudaMalloc(&a, bytes));
  NIBBLE_CUDA_CHECK(cudaMalloc(&b, bytes));
  NIBBLE_CUDA_CHECK(cudaMemsetAsync(a, 0x5A, bytes, stream));
  cudaEvent_t e0, e1;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e0));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> gbps;
  for (int rep = 0; rep < 12; ++rep) {
    NIBBLE_CUDA_CHECK(cudaEventRecord(e0, stream));
    NIBBLE_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
    NIBBLE_CUDA_CHECK(cudaEventRecord(e1, stream));
    NIBBLE_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep >= 2) gbps.push_back(2.0 * double(bytes) / (ms * 1e-3) / 1e9);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return median(gbps);
}

}  // namespace nibble::cuda

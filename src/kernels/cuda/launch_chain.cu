// `nibble bench chain`: what a kernel boundary costs in a CUDA graph of dependent kernels that do
// nothing but stream their bytes, the decode step's structure without its arithmetic. Each kernel
// reads its own region of a buffer far larger than the L2 with 16-byte streaming loads, requesting
// its first loads before griddepcontrol.wait as the decode GEMVs do (gemv.cuh), and the chain is
// timed against one kernel reading all of the regions.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "device_info.h"
#include "gemv.cuh"
#include "nibble/cuda/bench.h"
#include "nibble/error.h"
#include "pdl.cuh"

namespace nibble::cuda {
namespace {

constexpr int kChainThreads = 256;
constexpr int kChainLoads = 4;  // 16-byte loads in flight per thread

// Reads n16 16-byte words from src, grid-stride. The words' XOR decides a store that never happens
// on the zeroed buffer but that the compiler cannot rule out, so every load is live.
__global__ void __launch_bounds__(kChainThreads) stream_read_kernel(const uint4* src, size_t n16, unsigned* sink) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t i0 = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint8_t* base = reinterpret_cast<const uint8_t*>(src);
  uint4 v[kChainLoads];
  auto load = [&](size_t i) { return i < n16 ? detail::load_stream(base + 16 * i) : make_uint4(0, 0, 0, 0); };
#pragma unroll
  for (int u = 0; u < kChainLoads; ++u) v[u] = load(i0 + u * stride);
  detail::pdl_wait();
  detail::pdl_trigger();
  unsigned acc = 0;
  for (size_t i = i0; i < n16; i += kChainLoads * stride)
#pragma unroll
    for (int u = 0; u < kChainLoads; ++u) {
      acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
      v[u] = load(i + (kChainLoads + u) * stride);
    }
  if (acc == 0xFFFFFFFFu) sink[blockIdx.x] = acc;
}

}  // namespace

ChainTiming time_stream_chain(size_t bytes, int kernels, cudaStream_t stream) {
  if (kernels < 2) throw Error("time_stream_chain: a chain needs at least 2 kernels");
  if (bytes % 16) throw Error("time_stream_chain: bytes per kernel must be a multiple of 16");
  const size_t region = std::max<size_t>(bytes, 16);
  DeviceArray<uint4> buf(region / 16 * size_t(kernels));
  DeviceArray<unsigned> sink(size_t(tc::sm_count()) * kChainCtasPerSm);
  NIBBLE_CUDA_CHECK(cudaMemsetAsync(buf.p, 0, region * size_t(kernels), stream));
  const dim3 grid(unsigned(tc::sm_count() * kChainCtasPerSm));
  const size_t n16 = bytes / 16;
  auto at = [&](int k) { return buf.p + region / 16 * size_t(k); };
  ChainTiming t;
  t.pdl_us = time_rotated_us(
      [&](int k, cudaStream_t s) { detail::launch_pdl(stream_read_kernel, grid, kChainThreads, 0, s, at(k), n16, sink.p); },
      kernels, stream, kernels, 15);
  t.plain_us = time_rotated_us(
      [&](int k, cudaStream_t s) { stream_read_kernel<<<grid, kChainThreads, 0, s>>>(at(k), n16, sink.p); }, kernels,
      stream, kernels, 15);
  // one kernel over all the regions: the same bytes with no boundary in between
  t.one_kernel_us = time_rotated_us(
      [&](int, cudaStream_t s) { stream_read_kernel<<<grid, kChainThreads, 0, s>>>(buf.p, n16 * kernels, sink.p); }, 1,
      stream, 2, 15) / kernels;
  return t;
}

}  // namespace nibble::cuda

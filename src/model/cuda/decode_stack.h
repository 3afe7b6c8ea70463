#pragma once
// A Batch's plan for the whole-stack decode kernel (src/kernels/cuda/decode_stack.cuh): every layer
// of a one-row decode step in one launch. Built where the model allows (unsupported() says why not),
// run by Batch::Impl::forward in place of the layers' kernels.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "kernels/cuda/decode_stack.h"
#include "model/cuda/device_buffer.h"
#include "model/cuda/device_model_impl.h"
#include "nibble/cuda/ops.h"

namespace nibble::cuda {

// What the step's activations and inputs live in (the Batch's scratch).
struct StackBuffers {
  float* x = nullptr;              // FP32 residual [H]: the embedding in, the last layer's sum out
  uint16_t *q = nullptr, *att = nullptr, *h = nullptr;  // [nh * d], [nh * d], [I]
  const float* rope = nullptr;     // [max_ctx][d] cosines, sines
  const int32_t* pos = nullptr;    // [1] on the device
  const int32_t* slot = nullptr;
};

class DecodeStack {
 public:
  // Why m's layers cannot run as one kernel with caches of type kv ("" when they can): the
  // format, the shapes, q/k norms, biases, an E4M3 cache, a device before sm_90.
  static std::string unsupported(const DeviceModel::Impl& m, ops::KvType kv);
  // caches: each layer's. Throws nibble::Error with unsupported()'s reason.
  DecodeStack(const DeviceModel::Impl& m, const std::vector<ops::KvCache>& caches, const StackBuffers& b);
  // All layers of a one-row step on `stream` (x in, x out; the final norm is the caller's).
  void run(cudaStream_t stream) const;
  // The grid (0: one CTA per SM). Fewer CTAs give each warp many tiles per GEMV: the tests' small
  // models then wrap the ring many times.
  void set_ctas(int ctas);

 private:
  std::vector<detail::StackLayerArgs> host_layers_;  // what layers_ holds, for set_ctas
  DeviceBuffer<detail::StackLayerArgs> layers_;
  DeviceBuffer<float> attn_ws_;
  DeviceBuffer<unsigned> sync_;
  detail::StackArgs args_;
  detail::StackLauncher launch_ = nullptr;
};

}  // namespace nibble::cuda

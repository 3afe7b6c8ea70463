#include <fmt/format.h>

#include "model/cuda/device_model_impl.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

DeviceBuffer<float> norm(const std::vector<float>& w) { return DeviceBuffer<float>(w); }

DeviceLinear linear(const LinearWeight& lw) { return DeviceLinear(lw.w, lw.bias, lw.name); }

}  // namespace

DeviceLayer::DeviceLayer(const LayerWeights& L, const ModelConfig& c)
    : attn_norm(norm(L.attn_norm)), ffn_norm(norm(L.ffn_norm)),
      q_norm(c.qk_norm ? norm(L.q_norm) : DeviceBuffer<float>()),
      k_norm(c.qk_norm ? norm(L.k_norm) : DeviceBuffer<float>()),
      q(linear(L.q)), k(linear(L.k)), v(linear(L.v)), o(linear(L.o)), gate(linear(L.gate)),
      up(linear(L.up)), down(linear(L.down)) {}

size_t DeviceLayer::decode_bytes() const {
  size_t b = attn_norm.bytes() + ffn_norm.bytes() + q_norm.bytes() + k_norm.bytes();
  for (const DeviceLinear* l : {&q, &k, &v, &o, &gate, &up, &down}) b += l->decode_bytes();
  return b;
}

size_t DeviceLayer::device_bytes() const {
  size_t b = attn_norm.bytes() + ffn_norm.bytes() + q_norm.bytes() + k_norm.bytes();
  for (const DeviceLinear* l : {&q, &k, &v, &o, &gate, &up, &down}) b += l->device_bytes();
  return b;
}

}  // namespace nibble::cuda

// DeviceModel's byte counts: what a decode step reads vs what the weights occupy.
#include <gtest/gtest.h>

#include "cuda_runtime/models.h"
#include "model/weights.h"
#include "nibble/cuda/runtime.h"

namespace nibble::cuda::test {
namespace {

size_t packed_bytes(const PackedTensor& t) { return t.qweight.size() + t.scales.size() + t.aux.size(); }

// nvfp4 at a shape every kernel takes: a step reads each linear's packed codes and scales once
// (about the serialized size), the norms and the FP16 output layer; the device also holds the
// tensor-core copies of the codes, the GEMM layout and the FP16 embedding table.
TEST(DeviceModelBytes, DecodeReadsThePackedWeightsOnce) {
  const auto m = load(llama_model(768), "nvfp4");
  const ModelWeights& w = m->weights();
  const ModelConfig& c = w.cfg;
  size_t want = 4 * size_t(c.hidden_size) * (2 * c.num_layers + 1) + size_t(c.vocab_size) * c.hidden_size * 2;
  for (const LayerWeights& L : w.layers)
    for (const LinearWeight* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) want += packed_bytes(l->w);
  DeviceModel dm(*m);
  EXPECT_NEAR(double(dm.weight_bytes()), double(want), 0.01 * double(want));
  EXPECT_GT(dm.device_bytes(), dm.weight_bytes() + size_t(c.vocab_size) * c.hidden_size * 2);
}

}  // namespace
}  // namespace nibble::cuda::test

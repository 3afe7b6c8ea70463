// The FFN norm computed inside the one-row gate/up GEMV (Batch::set_fused_ffn_norm, on by default)
// decodes the same bits as the norm kernel of its own, step after step (the residual then takes
// o's and down's outputs in one later add, in the same order). The tiny model's gate/up would
// otherwise take K splits, which the fused kernel does not do, so a tuning entry asks for one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/format_name.h"
#include "cuda_runtime/models.h"
#include "nibble/cuda/linear.h"
#include "nibble/cuda/runtime.h"
#include "nibble/cuda/tuning.h"
#include "nibble/format.h"

namespace nibble::cuda::test {
namespace {

// Greedy decode of slot 0 for `steps` steps after a prefill: every step's logits.
std::vector<std::vector<float>> decode_run(Batch& b, int steps) {
  b.reset(0);
  std::vector<float> l = b.prefill(0, std::vector<int32_t>{5, 9, 13, 2, 7, 1, 4, 8});
  std::vector<std::vector<float>> out;
  const std::vector<int> slot{0};
  for (int s = 0; s < steps; ++s) {
    int32_t next = 0;
    for (size_t i = 1; i < l.size(); ++i)
      if (l[i] > l[size_t(next)]) next = int32_t(i);
    l = b.decode(slot, std::vector<int32_t>{next});
    out.push_back(l);
  }
  return out;
}

class FusedFfnNorm : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedFfnNorm, SameBitsAsTheNormKernel) {
  const std::string format = GetParam();
  const TinyHf& hf = llama_model(768);
  const int H = hf.spec().hidden, I = hf.spec().inter;
  TuningEntry one_split{format, H, 2 * I, 1, {}};
  one_split.choice.k_splits = 1;
  set_tuning_table({one_split});
  {
    // the gate/up shape of this model does take the fused kernel under that entry
    std::vector<float> w(size_t(I) * H, 0.01f);
    const PackedTensor t = quantize(format, w.data(), I, H);
    EXPECT_TRUE(linear_fuses_rmsnorm(upload_silu_pair(t, t, "gate_up"), 1));
  }
  const auto m = load(hf, format);
  DeviceModel dm(*m);
  Batch b(dm, {1, 64, true});
  const auto fused = decode_run(b, 6);
  b.set_fused_ffn_norm(false);
  const auto separate = decode_run(b, 6);
  set_tuning_table({});
  ASSERT_EQ(fused.size(), separate.size());
  for (size_t s = 0; s < fused.size(); ++s) EXPECT_EQ(fused[s], separate[s]) << "step " << s;
}

INSTANTIATE_TEST_SUITE_P(Formats, FusedFfnNorm, ::testing::Values("mxfp4", "int4-g128"),
                         FormatName());

}  // namespace
}  // namespace nibble::cuda::test

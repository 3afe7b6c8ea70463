// NF4 dequantization kernels (paper 003): branch tree and shared-memory table give bit-identical
// fp16, equal to the CPU registry's decode rounded to fp16; outputs poisoned before each run.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda/gpu_buffer.h"
#include "nibble/cuda/linear.h"
#include "nibble/format.h"
#include "nibble/half.h"

namespace nibble::cuda {
namespace {

using test::GpuBuffer;

TEST(Nf4Dequant, BranchTreeAndLutAreBitIdenticalAndMatchCpu) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (auto [N, K] : {std::pair<int64_t, int64_t>{3, 64}, {37, 320}, {129, 2112}}) {
    std::vector<float> w(size_t(N * K));
    for (auto& v : w) v = d(g);
    for (int64_t k = 0; k < K; ++k) w[size_t(k)] = 0.0f;  // an all-zero row
    const PackedTensor t = quantize("nf4", w.data(), N, K);
    const std::vector<float> ref = dequantize(t);
    const DeviceWeight dw = upload(t, "nf4");
    GpuBuffer<uint16_t> tree(size_t(N * K)), lut(size_t(N * K));
    tree.poison();
    lut.poison();
    nf4_dequantize(dw, tree.get(), Nf4Dequant::branch_tree, nullptr);
    nf4_dequantize(dw, lut.get(), Nf4Dequant::shared_lut, nullptr);
    const auto a = tree.host(), b = lut.host();
    int bad = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i] || a[i] != float_to_half(ref[i])) {
        if (++bad <= 5)
          ADD_FAILURE() << "N=" << N << " K=" << K << " element " << i << ": tree " << std::hex << a[i] << " lut "
                        << b[i] << " cpu " << float_to_half(ref[i]);
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(Nf4Dequant, RejectsOtherFormats) {
  std::vector<float> w(16 * 64, 0.25f);
  const DeviceWeight dw = upload(quantize("nvfp4", w.data(), 16, 64), "w");
  GpuBuffer<uint16_t> out(16 * 64);
  EXPECT_THROW(nf4_dequantize(dw, out.get(), Nf4Dequant::shared_lut, nullptr), Error);
}

}  // namespace
}  // namespace nibble::cuda

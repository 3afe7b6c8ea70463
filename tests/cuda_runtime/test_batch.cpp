// Batched decode: several slots at different positions, CUDA graphs, per-slot independence.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cuda_runtime/compare.h"
#include "cuda_runtime/models.h"
#include "nibble/cuda/runtime.h"

namespace nibble::cuda::test {
namespace {

constexpr int kSlots = 3;
constexpr int kPromptLen[kSlots] = {5, 17, 30};  // the slots decode at different positions

struct StepLogits {
  std::vector<std::vector<float>> logits;  // per step, [rows, V]
  std::vector<std::vector<int32_t>> fed;   // per step, the token fed to each slot
};

// Prefills every slot, then `steps` batched decode steps of all slots (or, with `alone`, each
// slot stepped by itself). The token fed is each slot's previous argmax, as computed in this run,
// or, with `follow`, the token `follow` fed at that step: two runs compared step by step then see
// the same inputs even where a near-tie of two logits resolves differently under another kernel.
StepLogits run_steps(const DeviceModel& dm, const std::vector<std::vector<int32_t>>& prompts, int steps, bool graphs,
                     bool alone, const StepLogits* follow = nullptr) {
  Batch b(dm, {kSlots, 128, graphs, kv_type(dm.model().options().kv_cache)});
  const int V = dm.model().config().vocab_size;
  std::vector<int32_t> next(kSlots);
  for (int s = 0; s < kSlots; ++s) {
    const std::vector<float> l = b.prefill(s, prompts[size_t(s)]);
    next[size_t(s)] = argmax_of(l);
  }
  StepLogits r;
  const std::vector<int> slots = {0, 1, 2};
  for (int step = 0; step < steps; ++step) {
    if (follow) next = follow->fed[size_t(step)];
    r.fed.push_back(next);
    std::vector<float> all;
    if (alone) {
      for (int s = 0; s < kSlots; ++s) {
        const std::vector<float> l = b.decode(std::span<const int>(&slots[size_t(s)], 1),
                                              std::span<const int32_t>(&next[size_t(s)], 1));
        all.insert(all.end(), l.begin(), l.end());
      }
    } else {
      all = b.decode(slots, next);
    }
    for (int s = 0; s < kSlots; ++s)
      next[size_t(s)] = argmax_of(std::span<const float>(all).subspan(size_t(s) * V, size_t(V)));
    r.logits.push_back(std::move(all));
  }
  for (int s = 0; s < kSlots; ++s) EXPECT_EQ(b.position(s), kPromptLen[s] + steps);
  return r;
}

std::vector<std::vector<int32_t>> prompts(uint32_t seed, int V) {
  std::mt19937 gen(seed);
  std::vector<std::vector<int32_t>> p;
  for (int n : kPromptLen) p.push_back(random_tokens(gen, n, V));
  return p;
}

class BatchedDecode : public ::testing::TestWithParam<const char*> {};

// The same tokens decoded three at a time or one at a time give the same logits (up to the
// rounding of kernels picked for another row count).
TEST_P(BatchedDecode, EqualsEachSlotAlone) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("model seed " + std::to_string(model_seed()) + ", prompt seed " + std::to_string(seed));
  const auto m = load(llama_model(768), GetParam());
  DeviceModel dm(*m);
  const auto p = prompts(seed, m->config().vocab_size);
  const StepLogits batched = run_steps(dm, p, 12, true, false), alone = run_steps(dm, p, 12, true, true, &batched);
  ASSERT_EQ(batched.logits.size(), alone.logits.size());
  for (size_t i = 0; i < batched.logits.size(); ++i) {
    const Diff d = diff(batched.logits[i], alone.logits[i]);
    EXPECT_LE(d.rel_rms, 5e-3) << "step " << i;
  }
}

// Graph replays run the very same kernels on the same data as direct launches: bit-identical.
TEST_P(BatchedDecode, GraphsBitIdentical) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("model seed " + std::to_string(model_seed()) + ", prompt seed " + std::to_string(seed));
  const auto m = load(llama_model(768), GetParam());
  DeviceModel dm(*m);
  const auto p = prompts(seed, m->config().vocab_size);
  const StepLogits with = run_steps(dm, p, 8, true, false), without = run_steps(dm, p, 8, false, false);
  for (size_t i = 0; i < with.logits.size(); ++i) {
    ASSERT_EQ(with.logits[i].size(), without.logits[i].size());
    EXPECT_EQ(0, std::memcmp(with.logits[i].data(), without.logits[i].data(), with.logits[i].size() * sizeof(float)))
        << "step " << i;
  }
}

// Decode graphs are kept per attention bucket (the rows' largest position rounded up to
// 256 * 2^k - 1): steps that cross position 256 capture a new graph, and its replays stay
// bit-identical to direct launches on both sides (a graph replayed past its bucket would leave
// the rows beyond it as NaN).
TEST(BatchedDecodeBuckets, GraphsFollowThePositionBucket) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("model seed " + std::to_string(model_seed()) + ", prompt seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  const auto m = load(llama_model(768), "nvfp4");
  const int V = m->config().vocab_size;
  DeviceModel dm(*m);
  const std::vector<std::vector<int32_t>> p = {random_tokens(gen, 250, V), random_tokens(gen, 253, V)};
  auto run = [&](bool graphs) {
    Batch b(dm, {2, 1024, graphs});  // the whole-cache hint would be 1023
    std::vector<int32_t> next(2);
    for (int s = 0; s < 2; ++s) next[size_t(s)] = argmax_of(b.prefill(s, p[size_t(s)]));
    const std::vector<int> slots = {0, 1};
    std::vector<std::vector<float>> out;
    for (int step = 0; step < 10; ++step) {  // positions 250..259 and 253..262
      std::vector<float> l = b.decode(slots, next);
      for (int s = 0; s < 2; ++s)
        next[size_t(s)] = argmax_of(std::span<const float>(l).subspan(size_t(s) * V, size_t(V)));
      out.push_back(std::move(l));
    }
    return out;
  };
  const auto with = run(true), without = run(false);
  for (size_t i = 0; i < with.size(); ++i) {
    for (float v : with[i]) ASSERT_TRUE(std::isfinite(v)) << "step " << i;
    EXPECT_EQ(0, std::memcmp(with[i].data(), without[i].data(), with[i].size() * sizeof(float))) << "step " << i;
  }
}

// nestedfp: the GEMM at every M; fp32: cuBLAS.
INSTANTIATE_TEST_SUITE_P(Formats, BatchedDecode, ::testing::Values("nvfp4", "nestedfp", "fp32"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// The E4M3 KV cache: slots decoded together = alone, graph replays = direct launches bit for bit.
// Together and alone run kernels of other row counts, whose last-bit differences in K and V move
// the few values near an E4M3 rounding boundary by a whole code (2^-3): 3e-2 instead of 5e-3 (a
// slot reading another's rows would be off by ~1).
TEST(BatchedDecodeFp8Kv, EqualsEachSlotAloneAndGraphsBitIdentical) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("model seed " + std::to_string(model_seed()) + ", prompt seed " + std::to_string(seed));
  const auto m = load(llama_model(768), "nvfp4", "", "fp8-e4m3");
  DeviceModel dm(*m);
  const auto p = prompts(seed, m->config().vocab_size);
  const StepLogits batched = run_steps(dm, p, 12, true, false), alone = run_steps(dm, p, 12, true, true, &batched);
  for (size_t i = 0; i < batched.logits.size(); ++i)
    EXPECT_LE(diff(batched.logits[i], alone.logits[i]).rel_rms, 3e-2) << "step " << i;
  const StepLogits direct = run_steps(dm, p, 12, false, false);
  for (size_t i = 0; i < batched.logits.size(); ++i)
    EXPECT_EQ(0, std::memcmp(batched.logits[i].data(), direct.logits[i].data(), batched.logits[i].size() * sizeof(float)))
        << "step " << i;
}

// Many rows in one step: above 16 the linears switch from the GEMV to the GEMM.
TEST(BatchedDecodeWide, TwentyRowsMatchTheCpu) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("model seed " + std::to_string(model_seed()) + ", prompt seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  const auto m = load(llama_model(768), "nvfp4");
  const int V = m->config().vocab_size, B = 20;
  DeviceModel dm(*m);
  Batch b(dm, {B, 32, true});
  std::vector<int> slots(B);
  std::vector<int32_t> first(B), second(B);
  std::vector<float> want;
  for (int s = 0; s < B; ++s) {
    slots[size_t(s)] = B - 1 - s;  // rows need not be in slot order
    const std::vector<int32_t> prompt = random_tokens(gen, 1 + s % 7, V);
    b.prefill(slots[size_t(s)], prompt);
    Session cpu(*m, 32);
    cpu.forward(prompt);
    first[size_t(s)] = random_tokens(gen, 1, V)[0];
    second[size_t(s)] = random_tokens(gen, 1, V)[0];
    cpu.forward(std::span<const int32_t>(&first[size_t(s)], 1));
    const std::vector<float> l = cpu.forward(std::span<const int32_t>(&second[size_t(s)], 1));
    want.insert(want.end(), l.begin(), l.end());
  }
  b.step(slots, first);
  const std::vector<float> got = b.decode(slots, second);  // the second step replays the graph
  const Diff d = diff(got, want);
  EXPECT_LE(d.rel_rms, kLogitsTol);
}

}  // namespace
}  // namespace nibble::cuda::test

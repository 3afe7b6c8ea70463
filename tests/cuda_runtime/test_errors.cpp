// Bad requests get a nibble::Error naming what is wrong, never a crash.
#include <gtest/gtest.h>

#include <functional>

#include "cuda_runtime/compare.h"
#include "cuda_runtime/models.h"
#include "nibble/cuda/runtime.h"
#include "nibble/error.h"

namespace nibble::cuda::test {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RuntimeErrors, KvCacheTooLarge) {
  const auto m = load(llama_model(768), "nvfp4");
  DeviceModel dm(*m);
  const ModelConfig& c = m->config();
  // 2 (K, V) x layers x slots x kv heads x positions x head_dim x 2 bytes
  EXPECT_EQ(Batch::kv_cache_bytes(c, 3, 100), size_t(2) * c.num_layers * 3 * c.num_kv_heads * 100 * c.head_dim * 2);
  // E4M3: one byte per element and an FP32 scale per row
  EXPECT_EQ(Batch::kv_cache_bytes(c, 3, 100, ops::KvType::e4m3),
            size_t(2) * c.num_layers * 3 * c.num_kv_heads * 100 * (c.head_dim + 4));
  const int fits = Batch::max_batch_that_fits(dm, 512);
  EXPECT_GE(fits, 1);
  const std::string msg = message_of([&] { Batch b(dm, {fits + 100000, 512, true}); });
  EXPECT_NE(msg.find("bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("free"), std::string::npos) << msg;
}

TEST(RuntimeErrors, ActivationFormatIsCpuOnly) {
  const auto m = load(llama_model(768), "nvfp4", "nvfp4");
  const std::string msg = message_of([&] { DeviceModel dm(*m); });
  EXPECT_NE(msg.find("activation format"), std::string::npos) << msg;
}

TEST(RuntimeErrors, KvFormatTheGpuDoesNotHold) {
  const auto m = load(llama_model(768), "nvfp4", "", "int4-g128");  // the CPU Session takes it
  const std::string msg = message_of([&] { DeviceModel dm(*m); });
  EXPECT_NE(msg.find("KV-cache format 'int4-g128'"), std::string::npos) << msg;
  EXPECT_NE(message_of([] { kv_type("fp8"); }).find("fp8-e4m3"), std::string::npos);
  EXPECT_EQ(kv_type(""), ops::KvType::fp16);
  EXPECT_EQ(kv_type("fp8-e4m3"), ops::KvType::e4m3);
}

TEST(RuntimeErrors, BadTokensSlotsAndContext) {
  const auto m = load(llama_model(768), "nvfp4");
  const int V = m->config().vocab_size;
  DeviceModel dm(*m);
  Batch b(dm, {2, 8, true});
  EXPECT_THROW(b.sample(std::vector<SampleParams>(1)), Error);  // no logits yet
  const std::vector<int32_t> bad_id = {1, V}, negative = {-1}, nine(9, 1), one = {3};
  EXPECT_NE(message_of([&] { b.prefill(0, bad_id); }).find("token id"), std::string::npos);
  EXPECT_THROW(b.prefill(0, negative), Error);
  EXPECT_NE(message_of([&] { b.prefill(0, nine); }).find("context overflow"), std::string::npos);
  EXPECT_NE(message_of([&] { b.prefill(2, one); }).find("slot 2"), std::string::npos);
  EXPECT_EQ(b.position(0), 0);  // nothing was appended by the failed calls
  b.prefill(0, std::vector<int32_t>(8, 5));
  const std::vector<int> s0 = {0}, s1 = {1}, s01 = {0, 1}, s012 = {0, 1, 2};
  EXPECT_NE(message_of([&] { b.step(s0, one); }).find("context overflow"), std::string::npos);
  EXPECT_NE(message_of([&] { b.step(std::vector<int>{1, 1}, std::vector<int32_t>{1, 2}); }).find("twice"),
            std::string::npos);
  EXPECT_THROW(b.step(s012, std::vector<int32_t>{1, 2, 3}), Error);  // more rows than max_batch
  EXPECT_THROW(b.step(s01, one), Error);                            // sizes differ
  EXPECT_THROW(b.step(s1, std::vector<int32_t>{V}), Error);
  EXPECT_THROW(b.sample(std::vector<SampleParams>(2)), Error);  // the prefill left one row
  b.reset(0);
  EXPECT_EQ(b.position(0), 0);
  EXPECT_EQ(b.decode(s0, one).size(), size_t(V));
}

TEST(RuntimeErrors, UnsupportedHeadDim) {
  TinyHfSpec s;
  s.head_dim = 32, s.layers = 1, s.vocab = 1024;
  const TinyHf model(s, fresh_seed());
  const auto m = load(model);
  const std::string msg = message_of([&] { DeviceModel dm(*m); });
  EXPECT_NE(msg.find("head_dim"), std::string::npos) << msg;
}

}  // namespace
}  // namespace nibble::cuda::test

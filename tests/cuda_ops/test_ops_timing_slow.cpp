// Timing lines (CUDA events, mean of 20 launches after 3 warm-ups) for the attention and sampling
// ops at Llama-8B-like shapes; they print figures, and only check that the outputs are finite.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>

#include "nibble/cuda/ops.h"
#include "ops_test_util.h"

namespace nibble::cuda::test {
namespace {

namespace ops = nibble::cuda::ops;

double mean_us(const std::function<void()>& launch) {
  for (int i = 0; i < 3; ++i) launch();
  cudaEvent_t a, b;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&a));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&b));
  NIBBLE_CUDA_CHECK(cudaEventRecord(a));
  constexpr int kIters = 20;
  for (int i = 0; i < kIters; ++i) launch();
  NIBBLE_CUDA_CHECK(cudaEventRecord(b));
  NIBBLE_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a), cudaEventDestroy(b);
  return 1e3 * ms / kIters;
}

void expect_finite(const std::vector<uint16_t>& h) {
  int bad = 0;
  for (uint16_t v : h) bad += !std::isfinite(half_to_float(v));
  EXPECT_EQ(bad, 0);
}

// A constant cache of B slots x ctx positions: FP16 about 0.07 (K) and 1 (V), or E4M3 codes 0.5
// with scales about 0.01.
struct ConstKv {
  GpuBuffer<uint8_t> k, v;
  GpuBuffer<float> ks, vs;
  ops::KvCache cache;
  size_t bytes;  // of K and V together, scales included
  ConstKv(ops::KvType type, size_t rows, int d, int ctx)
      : k(rows * ops::kv_row_bytes(type, d)), v(rows * ops::kv_row_bytes(type, d)), ks(rows), vs(rows),
        cache{type, k.get(), v.get(), nullptr, nullptr, ctx}, bytes(2 * rows * ops::kv_row_bytes(type, d)) {
    const size_t n = rows * d * (type == ops::KvType::e4m3 ? 1 : 2);
    NIBBLE_CUDA_CHECK(cudaMemset(k.get(), type == ops::KvType::e4m3 ? 0x30 : 0x2C, n));
    NIBBLE_CUDA_CHECK(cudaMemset(v.get(), type == ops::KvType::e4m3 ? 0x30 : 0x3C, n));
    if (type == ops::KvType::e4m3) {
      NIBBLE_CUDA_CHECK(cudaMemset(ks.get(), 0x3C, rows * 4));
      NIBBLE_CUDA_CHECK(cudaMemset(vs.get(), 0x3C, rows * 4));
      cache.k_scale = ks.get(), cache.v_scale = vs.get();
    }
  }
};

TEST(OpsTimingSlow, AttentionDecodeLlama8B) {
  const int nh = 32, nkv = 8, d = 128;
  for (const ops::KvType type : {ops::KvType::fp16, ops::KvType::e4m3})
    for (int B : {1, 16, 64})
      for (int ctx : {512, 4096}) {
        ConstKv kv(type, size_t(B) * nkv * ctx, d, ctx);
        GpuBuffer<uint16_t> q(size_t(B) * nh * d), out(size_t(B) * nh * d);
        NIBBLE_CUDA_CHECK(cudaMemset(q.get(), 0x3C, size_t(B) * nh * d * 2));
        std::vector<int32_t> slot(static_cast<size_t>(B)), pos(size_t(B), ctx - 1);
        for (int b = 0; b < B; ++b) slot[size_t(b)] = b;
        GpuBuffer<int32_t> ds(slot), dp(pos);
        GpuBuffer<uint8_t> ws(ops::attention_decode_workspace_bytes(B, nh, d, ctx));
        ws.zero();
        out.poison();
        const double us = mean_us([&] {
          ops::attention_decode(q.get(), B, ds.get(), dp.get(), ctx - 1, kv.cache, nh, nkv, d, out.get(), ws.get(),
                                nullptr);
        });
        std::printf("attention_decode %s B=%d ctx=%d heads 32/8/128: %.1f us, K+V read at %.0f GB/s\n",
                    type == ops::KvType::e4m3 ? "e4m3" : "fp16", B, ctx, us, double(kv.bytes) / (us * 1e3));
        expect_finite(out.host());
      }
}

TEST(OpsTimingSlow, AttentionPrefillLlama8B) {
  const int nh = 32, nkv = 8, d = 128;
  for (const ops::KvType type : {ops::KvType::fp16, ops::KvType::e4m3})
    for (int T : {512, 2048}) {
      ConstKv kv(type, size_t(nkv) * T, d, T);
      GpuBuffer<uint16_t> q(size_t(T) * nh * d), out(size_t(T) * nh * d);
      NIBBLE_CUDA_CHECK(cudaMemset(q.get(), 0x3C, size_t(T) * nh * d * 2));
      out.poison();
      const double us = mean_us([&] { ops::attention_prefill(q.get(), T, 0, 0, kv.cache, nh, nkv, d, out.get(), nullptr); });
      const double flops = 4.0 * nh * d * (double(T) * (T + 1) / 2);  // QK^T and PV, causal half
      std::printf("attention_prefill %s T=%d heads 32/8/128: %.1f us, %.1f TFLOP/s\n",
                  type == ops::KvType::e4m3 ? "e4m3" : "fp16", T, us, flops / (us * 1e6));
      expect_finite(out.host());
    }
}

// Two logit shapes: a broad one (sin, ~a quarter of the vocabulary within 2 of the max: what
// random-weight models give) and a peaked one (Gaussian, standard deviation 3: a few hundred
// tokens carry the nucleus, closer to a trained model).
TEST(OpsTimingSlow, SampleAndEntropyQwenVocab) {
  const int V = 151936;
  for (const bool broad : {true, false}) {
    for (int B : {1, 64}) {
      std::vector<float> z(size_t(B) * V);
      std::mt19937 gen(5);
      std::normal_distribution<float> nd(0.0f, 3.0f);
      for (size_t i = 0; i < z.size(); ++i) z[i] = broad ? float(std::sin(double(i) * 0.37) * 8) : nd(gen);
      GpuBuffer<float> dz(z), ent(static_cast<size_t>(B));
      GpuBuffer<ops::SampleRow> rows(std::vector<ops::SampleRow>(size_t(B), {0.7f, 0.9f, 0.42f, 0.0f, 0, 0.0f, 0.0}));
      GpuBuffer<int32_t> out(static_cast<size_t>(B)), arg(static_cast<size_t>(B));
      GpuBuffer<uint8_t> ws(std::max(ops::sample_workspace_bytes(B, V), ops::entropy_workspace_bytes(B, V)));
      const double us_sample = mean_us(
          [&] { ops::sample(dz.get(), B, V, rows.get(), ops::SampleRule::fixed, out.get(), nullptr, ws.get(), nullptr); });
      const double us_ent = mean_us([&] { ops::logits_entropy_argmax(dz.get(), B, V, ent.get(), arg.get(), ws.get(), nullptr); });
      std::printf("%s logits: sample B=%d V=%d (T=0.7, top_p=0.9): %.1f us; logits_entropy_argmax: %.1f us\n",
                  broad ? "broad" : "peaked", B, V, us_sample, us_ent);
      for (int32_t id : out.host()) EXPECT_TRUE(id >= 0 && id < V);
    }
  }
}

}  // namespace
}  // namespace nibble::cuda::test

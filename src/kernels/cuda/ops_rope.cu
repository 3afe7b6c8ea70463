// Per-head q/k RMSNorm (Qwen3), RoPE (HF convention: i pairs with i + d/2) and the KV-cache store.
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// One warp per head: optional RMSNorm over d with weight w, then the rotation at position cs, the
// result (fp16) written to dst. src and dst may alias (q in place): the norm's reads end in the
// warp_sum before any write, and each lane then rewrites only the pair (i, i + d/2) it read.
__device__ void norm_rope_head(const uint16_t* src, uint16_t* dst, int d, const float* w, float eps,
                               const float* cs) {
  const int lane = threadIdx.x & 31, half = d / 2;
  float r = 1.0f;
  if (w) {
    float ss = 0;
#pragma unroll 4
    for (int i = lane; i < d; i += 32) {
      const float v = h2f(src[i]);
      ss += v * v;
    }
    r = rsqrtf(warp_sum(ss) / float(d) + eps);
  }
#pragma unroll 2
  for (int i = lane; i < half; i += 32) {
    float a = h2f(src[i]), b = h2f(src[i + half]);
    if (w) a = w[i] * (a * r), b = w[i + half] * (b * r);
    const float c = cs[i], s = cs[half + i];
    dst[i] = f2h(a * c - b * s);
    dst[i + half] = f2h(b * c + a * s);
  }
}

// Grid (token, group of kWarps heads): one warp per q or k head, so a token's heads run side by
// side (a loop over the heads in one CTA waited on each head's loads in turn). The warp of k head
// g also stores v head g.
__global__ void __launch_bounds__(kThreads)
    qk_norm_rope_store_kernel(uint16_t* q, const uint16_t* k, const uint16_t* v, int nh, int nkv, int d,
                              const float* q_norm, const float* k_norm, float eps, const float* cos_sin,
                              const int32_t* slot, const int32_t* pos, uint16_t* k_cache, uint16_t* v_cache,
                              int max_ctx) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, p = pos[t], s = slot[t];
  if (p < 0 || p >= max_ctx || s < 0) return;  // the host checks these; never write out of bounds
  const float* cs = cos_sin + int64_t(p) * d;
  const int h = blockIdx.y * kWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (h < nh) {
    uint16_t* qh = q + (int64_t(t) * nh + h) * d;
    norm_rope_head(qh, qh, d, q_norm, eps, cs);
  } else if (h < nh + nkv) {
    const int g = h - nh;
    const int64_t dst = ((int64_t(s) * nkv + g) * max_ctx + p) * d;
    norm_rope_head(k + (int64_t(t) * nkv + g) * d, k_cache + dst, d, k_norm, eps, cs);
    const uint16_t* vh = v + (int64_t(t) * nkv + g) * d;
    for (int i = lane; i < d; i += 32) v_cache[dst + i] = vh[i];
  }
}

}  // namespace

void qk_norm_rope_store(uint16_t* q, const uint16_t* k, const uint16_t* v, int T, int nh, int nkv, int d,
                        const float* q_norm, const float* k_norm, float eps, const float* cos_sin,
                        const int32_t* slot, const int32_t* pos, uint16_t* k_cache, uint16_t* v_cache,
                        int max_ctx, cudaStream_t stream) {
  const char* fn = "qk_norm_rope_store";
  require(T >= 0 && nh > 0 && nkv > 0 && max_ctx > 0, fn,
          "bad shape T=" + std::to_string(T) + " nh=" + std::to_string(nh) + " nkv=" + std::to_string(nkv) +
              " max_ctx=" + std::to_string(max_ctx));
  require(d > 0 && d % 2 == 0, fn, "head dim d=" + std::to_string(d) + " must be positive and even");
  require(eps >= 0, fn, "eps must be >= 0");
  if (T == 0) return;
  require_ptr(q, fn, "q"), require_ptr(k, fn, "k"), require_ptr(v, fn, "v"), require_ptr(cos_sin, fn, "cos_sin");
  require_ptr(slot, fn, "slot"), require_ptr(pos, fn, "pos");
  require_ptr(k_cache, fn, "k_cache"), require_ptr(v_cache, fn, "v_cache");
  const dim3 grid(unsigned(T), unsigned((nh + nkv + kWarps - 1) / kWarps));
  launch_pdl(qk_norm_rope_store_kernel, grid, kThreads, 0, stream, q, k, v, nh, nkv, d, q_norm, k_norm, eps, cos_sin, slot,
                                                        pos, k_cache, v_cache, max_ctx);
  check_launch(fn);
}

}  // namespace nibble::cuda::ops

// Per-head q/k RMSNorm (Qwen3), RoPE (HF convention: i pairs with i + d/2) and the KV-cache store
// (FP16, or E4M3 codes + one FP32 scale per row as the CPU's fp8-e4m3 format writes them).
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"
#include "ops_kv.cuh"
#include "rope_rotate.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// One warp per head: optional RMSNorm over d with weight w, then the rotation at position cs;
// f(i, a, b) gets the rotated pair (i, i + d/2) of each of this lane's i. src may be the q row
// that f rewrites in place: the norm's reads end in the warp_sum before f runs, and each lane
// rewrites only the pair (i, i + d/2) it read.
template <class F>
__device__ void norm_rope_pairs(const uint16_t* src, int d, const float* w, float eps, const float* cs, F&& f) {
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
    const cuda::detail::RopePair t = cuda::detail::rope_rotate(a, b, cs[i], cs[half + i]);
    f(i, t.a, t.b);
  }
}

// A warp's E4M3 row of d values (value(i) gives value i, computed the same way on each call):
// scale = amax / 448, code = E4M3(x / scale) from the float64 quotient, as the CPU format does.
template <class V>
__device__ void store_e4m3_row(int d, V&& value, uint8_t* codes, float* scale) {
  const int lane = threadIdx.x & 31;
  float amax = 0;
  for (int i = lane; i < d; i += 32) amax = fmaxf(amax, fabsf(value(i)));
  const float s = warp_max(amax) / 448.0f;
  if (lane == 0) *scale = s;
  for (int i = lane; i < d; i += 32)
    codes[i] = s == 0.0f ? 0 : uint8_t(cuda::detail::e4m3_signed_code(double(value(i)) / double(s)));
}

// Grid (token, group of kWarps heads): one warp per q or k head, so a token's heads run side by
// side (a loop over the heads in one CTA waited on each head's loads in turn). The warp of k head
// g also stores v head g. One kernel per cache type (the FP16 one has no E4M3 code or buffer).
template <bool kE4m3>
__global__ void __launch_bounds__(kThreads)
    qk_norm_rope_store_kernel(uint16_t* q, const uint16_t* k, const uint16_t* v, int nh, int nkv, int d,
                              const float* q_norm, const float* k_norm, float eps, const float* cos_sin,
                              const int32_t* slot, const int32_t* pos, const KvCache cache) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, p = pos[t], s = slot[t];
  if (p < 0 || p >= cache.max_ctx || s < 0) return;  // the host checks these; never write out of bounds
  const float* cs = cos_sin + int64_t(p) * d;
  const int h = blockIdx.y * kWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31, half = d / 2;
  if (h < nh) {
    uint16_t* qh = q + (int64_t(t) * nh + h) * d;
    norm_rope_pairs(qh, d, q_norm, eps, cs, [&](int i, float a, float b) { qh[i] = f2h(a), qh[i + half] = f2h(b); });
  } else if (h < nh + nkv) {
    const int g = h - nh;
    const int64_t row = (int64_t(s) * nkv + g) * cache.max_ctx + p;
    const uint16_t* kh = k + (int64_t(t) * nkv + g) * d;
    const uint16_t* vh = v + (int64_t(t) * nkv + g) * d;
    if constexpr (!kE4m3) {
      uint16_t* kc = static_cast<uint16_t*>(cache.k) + row * d;
      uint16_t* vc = static_cast<uint16_t*>(cache.v) + row * d;
      norm_rope_pairs(kh, d, k_norm, eps, cs, [&](int i, float a, float b) { kc[i] = f2h(a), kc[i + half] = f2h(b); });
      for (int i = lane; i < d; i += 32) vc[i] = vh[i];
    } else {
      // The rotated row passes through shared memory: the scale needs all of it first.
      __shared__ float rot[kWarps][256];
      float* kr = rot[threadIdx.x >> 5];
      norm_rope_pairs(kh, d, k_norm, eps, cs, [&](int i, float a, float b) { kr[i] = a, kr[i + half] = b; });
      __syncwarp();
      store_e4m3_row(d, [&](int i) { return kr[i]; }, static_cast<uint8_t*>(cache.k) + row * d, cache.k_scale + row);
      store_e4m3_row(d, [&](int i) { return h2f(vh[i]); }, static_cast<uint8_t*>(cache.v) + row * d,
                     cache.v_scale + row);
    }
  }
}

}  // namespace

size_t kv_row_bytes(KvType type, int d) {
  return type == KvType::e4m3 ? size_t(d) + sizeof(float) : size_t(d) * sizeof(uint16_t);
}

void qk_norm_rope_store(uint16_t* q, const uint16_t* k, const uint16_t* v, int T, int nh, int nkv, int d,
                        const float* q_norm, const float* k_norm, float eps, const float* cos_sin,
                        const int32_t* slot, const int32_t* pos, const KvCache& cache, cudaStream_t stream) {
  const char* fn = "qk_norm_rope_store";
  require(T >= 0 && nh > 0 && nkv > 0, fn,
          "bad shape T=" + std::to_string(T) + " nh=" + std::to_string(nh) + " nkv=" + std::to_string(nkv));
  require(d > 0 && d % 2 == 0, fn, "head dim d=" + std::to_string(d) + " must be positive and even");
  require(cache.type == KvType::fp16 || (d % 8 == 0 && d <= 256), fn,
          "an E4M3 cache needs d a multiple of 8 up to 256, got d=" + std::to_string(d));
  require(eps >= 0, fn, "eps must be >= 0");
  require_kv(cache, fn);
  if (T == 0) return;
  require_ptr(q, fn, "q"), require_ptr(k, fn, "k"), require_ptr(v, fn, "v"), require_ptr(cos_sin, fn, "cos_sin");
  require_ptr(slot, fn, "slot"), require_ptr(pos, fn, "pos");
  const dim3 grid(unsigned(T), unsigned((nh + nkv + kWarps - 1) / kWarps));
  auto go = [&](auto kernel) {
    launch_pdl(kernel, grid, kThreads, 0, stream, q, k, v, nh, nkv, d, q_norm, k_norm, eps, cos_sin, slot, pos, cache);
  };
  if (cache.type == KvType::e4m3)
    go(qk_norm_rope_store_kernel<true>);
  else
    go(qk_norm_rope_store_kernel<false>);
  check_launch(fn);
}

}  // namespace nibble::cuda::ops

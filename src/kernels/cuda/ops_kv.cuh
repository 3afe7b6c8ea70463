#pragma once
// How the attention kernels read a KV cache (nibble/cuda/ops.h, KvCache): per element type, the
// bytes of an element and a word of 8 elements unpacked to floats. E4M3 rows carry an FP32 scale
// that the kernels apply to a whole row's dot product (K) or probability (V).
#include <cstdint>

#include "e4m3.cuh"
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"

namespace nibble::cuda::ops::detail {

struct KvF16 {
  static constexpr int kElemBytes = 2;
  static constexpr bool kScaled = false;
  using Word = uint4;  // 8 fp16
  __device__ __forceinline__ static uint4 half8(const Word& w) { return w; }
  __device__ __forceinline__ static void unpack(const Word& w, float (&f)[8]) { unpack8(w, f); }
};

struct KvE4m3 {
  static constexpr int kElemBytes = 1;
  static constexpr bool kScaled = true;
  using Word = uint2;  // 8 E4M3 codes, unscaled (exact in fp16)
  __device__ __forceinline__ static uint4 half8(const Word& w) { return cuda::detail::e4m3x8_to_half8(w); }
  __device__ __forceinline__ static void unpack(const Word& w, float (&f)[8]) { unpack8(half8(w), f); }
};

// The cache pointers of one (slot, KV head): rows [max_ctx] of d elements, and their scales.
struct KvHead {
  const uint8_t* k;
  const uint8_t* v;
  const float* ks;  // e4m3 only
  const float* vs;
};
// row0: the head's first row, (slot * nkv + head) * max_ctx (+ a first position).
template <class Kv>
__device__ __forceinline__ KvHead kv_head(const KvCache& c, int d, int64_t row0) {
  const int64_t off = row0 * d * Kv::kElemBytes;
  return {static_cast<const uint8_t*>(c.k) + off, static_cast<const uint8_t*>(c.v) + off,
          Kv::kScaled ? c.k_scale + row0 : nullptr, Kv::kScaled ? c.v_scale + row0 : nullptr};
}

// Host-side checks shared by the ops that take a KvCache.
inline void require_kv(const KvCache& c, const char* fn) {
  require(c.max_ctx > 0, fn, "KV cache max_ctx=" + std::to_string(c.max_ctx) + " must be positive");
  require_ptr(c.k, fn, "k_cache"), require_ptr(c.v, fn, "v_cache");
  require(aligned16(c.k) && aligned16(c.v), fn, "k_cache and v_cache must be 16-byte aligned");
  if (c.type == KvType::e4m3) require_ptr(c.k_scale, fn, "k_scale"), require_ptr(c.v_scale, fn, "v_scale");
}

// f(traits) with the traits of the cache's element type.
template <class F>
auto with_kv(const KvCache& c, F&& f) {
  if (c.type == KvType::e4m3) return f(KvE4m3{});
  return f(KvF16{});
}

}  // namespace nibble::cuda::ops::detail

// W4A16 tensor-core GEMM: 4-bit codes (repacked offline, gemm_repack.cpp) and per-group metadata
// words are staged with cp.async, then dequantized in registers straight into the fp16 B
// fragments of m16n8k16. Metadata word per (group, column): low half the fp16 group scale, high
// half the fp16 special value (FP4: code -0 decodes to it; 0 for plain formats) or 1024 + zero
// point (INT4). The FP32 global scale is applied in the epilogue.
#include <cuda_fp16.h>

#include <string>

#include "gemm_kernels.cuh"
#include "gemm_launch.cuh"
#include "nibble/error.h"

namespace nibble::cuda::tc {
namespace {

template <W4Decode D>
struct W4 {
  struct Params {
    const uint32_t* codes;  // [N, K/32, 4] words: word t of a 32-k chunk holds thread t's 8 codes
    const uint32_t* meta;   // [K/group, N]
    int N;
    int64_t K;
    int group;
  };
  static constexpr int kCodeStride = 32 + 16;  // 32 code bytes (64 k) per row per stage; conflict-free
  template <int BN>
  static constexpr int stage_bytes() {
    return BN * kCodeStride + 4 * BN * 4;  // codes, then up to four metadata rows (group 16)
  }
  __device__ __forceinline__ static int groups_per_stage(int group) { return group < 64 ? 64 / group : 1; }

  template <class T>
  __device__ __forceinline__ static void load_stage(uint8_t* Bs, const Params& p, int n0, int kt) {
    const int gps = groups_per_stage(p.group);
    const int g0 = kt * 64 / p.group;
    const int code_chunks = 2 * T::BN, meta_chunks = gps * T::BN / 4, total = code_chunks + meta_chunks;
    const int64_t row_words = p.K / 8;
    for (int c = threadIdx.x; c < total; c += T::THREADS) {
      if (c < code_chunks) {
        const int r = c >> 1, half = c & 1;
        const bool ok = n0 + r < p.N;
        const uint32_t* src = ok ? p.codes + int64_t(n0 + r) * row_words + int64_t(kt) * 8 + half * 4 : p.codes;
        cp_async16(Bs + r * kCodeStride + half * 16, src, ok);
      } else {
        const int mc = c - code_chunks, gi = mc / (T::BN / 4), col = mc % (T::BN / 4);
        const bool ok = n0 + 4 * col < p.N;
        const uint32_t* src = ok ? p.meta + int64_t(g0 + gi) * p.N + n0 + 4 * col : p.meta;
        cp_async16(Bs + T::BN * kCodeStride + (gi * T::BN + 4 * col) * 4, src, ok);
      }
    }
  }

  // Codes of pair p (nibbles p and p + 4 of w) -> two fp16 weights times the group scale.
  __device__ __forceinline__ static uint32_t decode(uint32_t w, int p, uint32_t meta) {
    const uint32_t x = w >> (4 * p);
    const __half2 scale = __halves2half2(__ushort_as_half(uint16_t(meta)), __ushort_as_half(uint16_t(meta)));
    const uint32_t hi = __byte_perm(meta, 0, 0x3232);
    __half2 v;
    if constexpr (D == W4Decode::fp4) {
      // S EEM -> fp16 S 000EE M000000000: the FP4 value times 2^-14, subnormals included.
      const uint32_t h = ((x & 0x00080008u) << 12) | ((x & 0x00070007u) << 9);
      const uint32_t special = __vcmpeq2(h, 0x80008000u);  // -0 is the special value
      const __half2 f = __hmul2(*reinterpret_cast<const __half2*>(&h), __float2half2_rn(16384.0f));
      const uint32_t hv = (*reinterpret_cast<const uint32_t*>(&f) & ~special) | (hi & special);
      v = *reinterpret_cast<const __half2*>(&hv);
    } else {
      const uint32_t h = (x & 0x000F000Fu) | 0x64006400u;  // fp16 1024 + q
      v = __hsub2(*reinterpret_cast<const __half2*>(&h), *reinterpret_cast<const __half2*>(&hi));
    }
    const __half2 r = __hmul2(v, scale);
    return *reinterpret_cast<const uint32_t*>(&r);
  }

  // k-step ks: pairs 2 (ks & 1) and 2 (ks & 1) + 1 of the word of 32-k chunk ks / 2.
  template <class T>
  __device__ __forceinline__ static void fragment(const uint8_t* Bs, const Params& p, int row, int t, int ks,
                                                  uint32_t (&b)[2]) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(Bs + row * kCodeStride + (ks >> 1) * 16 + 4 * t);
    const uint32_t* metas = reinterpret_cast<const uint32_t*>(Bs + T::BN * kCodeStride);
    const int gl = p.group < 64 ? ks * 16 / p.group : 0;
    const uint32_t meta = metas[gl * T::BN + row];
    b[0] = decode(w, 2 * (ks & 1), meta);
    b[1] = decode(w, 2 * (ks & 1) + 1, meta);
  }
};

}  // namespace

void w4a16(const uint16_t* x, int M, const uint32_t* codes, const uint32_t* meta, int group, W4Decode decode, int N,
           int K, float alpha, uint16_t* y, GemmWorkspace& ws, int split_k, cudaStream_t stream) {
  if (M < 1 || N % 8 != 0 || K % 64 != 0 || (group != 16 && group != 32 && group % 64 != 0) || K % group != 0)
    throw Error("W4A16 GEMM: unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " group=" + std::to_string(group));
  Problem p{reinterpret_cast<const uint8_t*>(x), int64_t(K) * 2, M, N, nullptr, alpha, y};
  if (decode == W4Decode::fp4)
    launch<MmaF16, W4<W4Decode::fp4>>(p, {codes, meta, N, K, group}, ws, split_k, stream);
  else
    launch<MmaF16, W4<W4Decode::int4>>(p, {codes, meta, N, K, group}, ws, split_k, stream);
}

}  // namespace nibble::cuda::tc

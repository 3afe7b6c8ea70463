// W4A16 tensor-core GEMM: 4-bit codes (repacked offline, gemm_repack.cpp) and per-group metadata
// words are staged with cp.async, then dequantized in registers straight into the fp16 B
// fragments of m16n8k16. Metadata word per (group, column): low half the fp16 group scale, high
// half the fp16 special value (FP4: code -0 decodes to it; 0 for plain formats) or 1024 + zero
// point (INT4); for NF4 the whole word is the FP32 absmax (levels from a 16-float table kept in
// shared memory). The FP32 global scale is applied in the epilogue.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "gemm_kernels.cuh"
#include "gemm_launch.cuh"
#include "gemm_w4_decode.cuh"
#include "nf4_levels.cuh"
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
  static constexpr int kLutBytes = D == W4Decode::nf4 ? 64 : 0;
  template <int BN>
  static constexpr int stage_bytes() {
    return BN * kCodeStride + 4 * BN * 4 + kLutBytes;  // codes, up to four metadata rows (group 16), NF4 levels
  }
  template <int BN>
  __device__ __forceinline__ static const float* lut(const uint8_t* Bs) {
    return reinterpret_cast<const float*>(Bs + BN * kCodeStride + 4 * BN * 4);
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
    // visible to the readers after the __syncthreads that precedes this stage's use
    if constexpr (D == W4Decode::nf4)
      if (threadIdx.x < 16) const_cast<float*>(lut<T::BN>(Bs))[threadIdx.x] = detail::kNf4Levels[threadIdx.x];
  }

  __device__ __forceinline__ static uint32_t decode(uint32_t w, int p, uint32_t meta, const float* levels) {
    return w4_decode_pair<D>(w, p, meta, levels);
  }

  // k-step ks: pairs 2 (ks & 1) and 2 (ks & 1) + 1 of the word of 32-k chunk ks / 2.
  template <class T>
  __device__ __forceinline__ static void fragment(const uint8_t* Bs, const Params& p, int row, int t, int ks,
                                                  uint32_t (&b)[2]) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(Bs + row * kCodeStride + (ks >> 1) * 16 + 4 * t);
    const uint32_t* metas = reinterpret_cast<const uint32_t*>(Bs + T::BN * kCodeStride);
    const int gl = p.group < 64 ? ks * 16 / p.group : 0;
    const uint32_t meta = metas[gl * T::BN + row];
    const float* levels = lut<T::BN>(Bs);
    b[0] = decode(w, 2 * (ks & 1), meta, levels);
    b[1] = decode(w, 2 * (ks & 1) + 1, meta, levels);
  }
};

// One thread per 32-k chunk of a row: its four code words (one 16-byte load) hold, in word t,
// the logical k 4t..4t+3 (pairs p = 0, 1) and 16+4t..19+4t (pairs 2, 3); written back as four
// 16-byte stores of 8 fp16 each.
template <W4Decode D>
__global__ void dequantize_kernel(const uint4* codes, const uint32_t* meta, int group, int N, int K, float alpha,
                                  uint4* out) {
  __shared__ float levels[16];
  if (threadIdx.x < 16) levels[threadIdx.x] = detail::kNf4Levels[threadIdx.x];
  __syncthreads();
  const int chunks_per_row = K / 32;
  const int64_t chunks = int64_t(N) * chunks_per_row;
  const bool alpha_one = alpha == 1.0f;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < chunks; c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = c / chunks_per_row;
    const int k0 = int(c % chunks_per_row) * 32;
    const uint4 w4 = codes[c];
    const uint32_t w[4] = {w4.x, w4.y, w4.z, w4.w};
    const uint32_t m_lo = meta[(k0 / group) * int64_t(N) + n], m_hi = meta[((k0 + 16) / group) * int64_t(N) + n];
    uint32_t h[16];  // h[8 * half + 2 * t + p']: k = 16 * half + 4t + 2p'
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        uint32_t v = W4<D>::decode(w[t], p, p < 2 ? m_lo : m_hi, levels);
        if (!alpha_one) {  // alpha in FP32, one rounding: the weight as fp16
          const float2 f = detail::h2bits_to_float2(v);
          v = detail::half2_bits(__floats2half2_rn(f.x * alpha, f.y * alpha));
        }
        h[(p >> 1) * 8 + 2 * t + (p & 1)] = v;
      }
    uint4* o = out + (n * K + k0) / 8;
#pragma unroll
    for (int q = 0; q < 4; ++q) o[q] = make_uint4(h[4 * q], h[4 * q + 1], h[4 * q + 2], h[4 * q + 3]);
  }
}

}  // namespace

void w4_dequantize(const uint32_t* codes, const uint32_t* meta, int group, W4Decode decode, int N, int K, float alpha,
                   uint16_t* out, cudaStream_t stream) {
  const int64_t chunks = int64_t(N) * K / 32;
  const int blocks = int(std::min<int64_t>((chunks + 255) / 256, 132 * 16));
  auto* o = reinterpret_cast<uint4*>(out);
  auto* c = reinterpret_cast<const uint4*>(codes);
  with_decode(decode, [&](auto d) {
    dequantize_kernel<decltype(d)::value><<<blocks, 256, 0, stream>>>(c, meta, group, N, K, alpha, o);
  });
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

void w4a16(const uint16_t* x, int M, const uint32_t* codes, const uint32_t* meta, int group, W4Decode decode, int N,
           int K, float alpha, uint16_t* y, GemmWorkspace& ws, int split_k, cudaStream_t stream,
           const float* row_scale) {
  if (M < 1 || N % 8 != 0 || K % 64 != 0 || (group != 16 && group != 32 && group % 64 != 0) || K % group != 0)
    throw Error("W4A16 GEMM: unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " group=" + std::to_string(group));
  Problem p{reinterpret_cast<const uint8_t*>(x), int64_t(K) * 2, M, N, row_scale, alpha, y};
  with_decode(decode, [&](auto d) {
    launch<MmaF16, W4<decltype(d)::value>>(p, {codes, meta, N, K, group}, ws, split_k, stream);
  });
}

}  // namespace nibble::cuda::tc

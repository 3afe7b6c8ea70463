// W4A16 on the Hopper wgmma GEMM (gemm_wgmma_core.cuh): the B policy stages the repacked 4-bit
// codes and metadata words of a 64-k tile (the mma.sync kernel's GemmWeight layout, gemm_api.cpp)
// and dequantizes them once per CTA with w4_decode_pair, the mma.sync kernel's own decode, into
// the swizzled fp16 tile, undoing the permuted K order of the repack. The FP32 global scale (and
// W4A4's per-row scale) is applied in the epilogue.
#include <cuda_fp16.h>

#include <string>

#include "gemm_w4_decode.cuh"
#include "gemm_wgmma.cuh"
#include "gemm_wgmma_launch.cuh"
#include "nf4_levels.cuh"
#include "nibble/error.h"

namespace nibble::cuda::wg {
namespace {

template <tc::W4Decode D>
struct W4Tile {
  struct Params {
    CUtensorMap codes;  // [N, K/8] words: word t of a 32-k chunk holds pairs of k 4t.., 16+4t..; box 8 x 128
    CUtensorMap meta;   // [K/group, N] words; box 128 x groups_per_tile
    int group;
    int groups_per_tile;  // metadata rows per 64-k tile: 64 / group, or 1
  };
  static constexpr int kCodeBytes = kBN * 32;                // 32 code bytes (64 k) per column
  static constexpr int kRawBytes = kCodeBytes + 4 * kBN * 4;  // + up to four metadata rows (group 16)
  static constexpr int kExtraBytes = D == tc::W4Decode::nf4 ? 64 : 0;
  // The special-value select and NF4's table + FP32 multiply: 256-row tiles keep the all-warps loop
  static constexpr bool kHeavyDecode = D == tc::W4Decode::fp4_special || D == tc::W4Decode::nf4;

  __device__ __forceinline__ static void init(uint8_t* extra) {
    if constexpr (D == tc::W4Decode::nf4)  // read after the kernel's one __syncthreads
      if (threadIdx.x < 16) reinterpret_cast<float*>(extra)[threadIdx.x] = detail::kNf4Levels[threadIdx.x];
  }

  __device__ __forceinline__ static uint32_t raw_bytes(const Params& p) {
    return kCodeBytes + p.groups_per_tile * kBN * 4;
  }
  __device__ __forceinline__ static void load_raw(uint8_t* raw, const Params& p, int n0, int kt, uint64_t* bar) {
    tma_load_2d(raw, &p.codes, kt * 8, n0, bar);
    const int g0 = p.group < 64 ? kt * p.groups_per_tile : kt * 64 / p.group;
    tma_load_2d(raw + kCodeBytes, &p.meta, n0, g0, bar);
  }

  // Thread pt -> column n, 32-k half h (h fastest: a quarter-warp reads 128 contiguous bytes): its
  // four code words hold 16 pairs; pair q of word t is logical k 32 h + 16 (q >> 1) + 4 t + 2 (q & 1),
  // so it lands at word 8 (q >> 1) + 2 t + (q & 1) of the half's 16 output words (4 swizzled chunks).
  __device__ __forceinline__ static void dequantize(const uint8_t* raw, uint8_t* bh, const Params& p,
                                                    const uint8_t* extra, int pt) {
    static_assert(2 * kBN == kDequantThreads, "one thread per column half");
    const int n = pt >> 1, h = pt & 1;
    const uint4 w4 = *reinterpret_cast<const uint4*>(raw + n * 32 + h * 16);
    const uint32_t w[4] = {w4.x, w4.y, w4.z, w4.w};
    const uint32_t* metas = reinterpret_cast<const uint32_t*>(raw + kCodeBytes);
    const int gl_lo = p.group < 64 ? 2 * h * p.groups_per_tile / 4 : 0;  // metadata row of k 32 h
    const int gl_hi = p.group < 64 ? (4 * h + 2) * p.groups_per_tile / 8 : 0;  // ... of k 32 h + 16
    const uint32_t m_lo = metas[gl_lo * kBN + n], m_hi = metas[gl_hi * kBN + n];
    const float* levels = reinterpret_cast<const float*>(extra);
    uint32_t o[16];
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
      for (int q = 0; q < 4; ++q) o[8 * (q >> 1) + 2 * t + (q & 1)] = tc::w4_decode_pair<D>(w[t], q, q < 2 ? m_lo : m_hi, levels);
#pragma unroll
    for (int c = 0; c < 4; ++c)
      *reinterpret_cast<uint4*>(bh + swizzled(n, 4 * h + c)) = make_uint4(o[4 * c], o[4 * c + 1], o[4 * c + 2], o[4 * c + 3]);
  }
};

}  // namespace

void w4a16(const uint16_t* x, int M, const uint32_t* codes, const uint32_t* meta, int group, tc::W4Decode decode,
           int N, int K, float alpha, uint16_t* y, GemmWorkspace& ws, int split_k, cudaStream_t stream,
           const float* row_scale, int block_m) {
  if (M < 1 || N < 8 || N % 8 != 0 || K < 64 || K % 64 != 0 || (group != 16 && group != 32 && group % 64 != 0) ||
      K % group != 0)
    throw Error("W4A16 wgmma GEMM: unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " group=" + std::to_string(group));
  const tc::Problem p{reinterpret_cast<const uint8_t*>(x), int64_t(K) * 2, M, N, row_scale, alpha, y};
  const int gpt = group < 64 ? 64 / group : 1;
  auto params = [&](auto tile) {
    using Params = typename decltype(tile)::Params;
    return Params{tensor_map_2d(codes, 4, uint64_t(K) / 8, uint64_t(N), uint64_t(K) / 2, 8, kBN, Swizzle::none, "W4 codes"),
                  tensor_map_2d(meta, 4, uint64_t(N), uint64_t(K / group), uint64_t(N) * 4, kBN, uint32_t(gpt),
                                Swizzle::none, "W4 metadata"),
                  group, gpt};
  };
  tc::with_decode(decode, [&](auto d) {
    using Tile = W4Tile<decltype(d)::value>;
    launch<Tile>(p, params(Tile{}), ws, split_k, block_m, stream);
  });
}

}  // namespace nibble::cuda::wg

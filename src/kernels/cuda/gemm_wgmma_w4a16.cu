// W4A16 on the Hopper register-A wgmma GEMM (gemm_wgmma_rega.cuh): the weight policy stages the
// repacked 4-bit codes and metadata words of a 64-k tile (the mma.sync kernel's GemmWeight layout,
// gemm_api.cpp: no second copy of the weights) and each thread decodes its own wgmma A fragments
// from them with w4_decode_pair, the mma.sync kernel's own decode, so both multiply the same fp16
// weights. The FP32 global scale (and W4A4's per-row scale) is applied in the epilogue.
// It replaced a kernel that dequantized each weight tile once per CTA into a swizzled fp16 shared
// memory tile (wgmma's B operand): 1.04-1.72x faster at every point measured (M 32-2048, seven
// formats; docs/perf/gemm-notes.md, "register A for W4").
#include <cuda_fp16.h>

#include <string>

#include "gemm_w4_decode.cuh"
#include "gemm_wgmma.cuh"
#include "gemm_wgmma_rega.cuh"
#include "nf4_levels.cuh"
#include "nibble/error.h"

namespace nibble::cuda::wg {
namespace {

template <tc::W4Decode D>
struct W4Codes {
  struct Params {
    CUtensorMap codes;  // [N, K/8] words: word t of a 32-k chunk holds pairs of k 4t.., 16+4t..; box 8 x 128
    CUtensorMap meta;   // [K/group, N] words; box 128 x groups_per_tile
    int group;
    int groups_per_tile;  // metadata rows per 64-k tile: 64 / group, or 1
  };
  static constexpr int kCodeBytes = kRegaRows * 32;                // 32 code bytes (64 k) per weight row
  static constexpr int kRawBytes = kCodeBytes + 4 * kRegaRows * 4;  // + up to four metadata rows (group 16)
  static constexpr int kRegaStages = 5;
  static constexpr int kExtraBytes = D == tc::W4Decode::nf4 ? 64 : 0;

  __device__ __forceinline__ static void init(uint8_t* extra) {
    if constexpr (D == tc::W4Decode::nf4)  // read after the kernel's first __syncthreads
      if (threadIdx.x < 16) reinterpret_cast<float*>(extra)[threadIdx.x] = detail::kNf4Levels[threadIdx.x];
  }

  __device__ __forceinline__ static uint32_t raw_bytes(const Params& p) {
    return kCodeBytes + p.groups_per_tile * kRegaRows * 4;
  }
  __device__ __forceinline__ static void load_raw(uint8_t* raw, const Params& p, int n0, int kt, uint64_t* bar) {
    tma_load_2d(raw, &p.codes, kt * 8, n0, bar);
    const int g0 = p.group < 64 ? kt * p.groups_per_tile : kt * 64 / p.group;
    tma_load_2d(raw + kCodeBytes, &p.meta, n0, g0, bar);
  }

  // Pair index i = k / 2 of a 32-k chunk sits in word i / 2 % 4 of the row's chunk, as its nibble
  // pair 2 (i / 8) + i % 2. Step 2 c + u of thread t = lane % 4 needs pairs 8 u + t (A fragment
  // registers of k 2t) and 8 u + t + 4 (of k 2t + 8): words t / 2 and t / 2 + 2, nibble pair
  // 2 u + t % 2. A thread reads its rows' whole 16-byte chunks and uses half of them.
  __device__ __forceinline__ static void fragments(const uint8_t* raw, const Params& p, int rl, const uint8_t* extra,
                                                   uint32_t (&a)[4][4]) {
    const int t = threadIdx.x & 3, sh = 4 * (t & 1);
    const uint32_t* metas = reinterpret_cast<const uint32_t*>(raw + kCodeBytes);
    const float* levels = reinterpret_cast<const float*>(extra);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = rl + 8 * h;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const uint4 w4 = *reinterpret_cast<const uint4*>(raw + r * 32 + c * 16);
        const uint32_t lo = (t & 2 ? w4.y : w4.x) >> sh, hi = (t & 2 ? w4.w : w4.z) >> sh;
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int s = 2 * c + u;
          const uint32_t m = metas[(s * p.groups_per_tile / 4) * kRegaRows + r];  // group of k 16 s
          a[s][h] = tc::w4_decode_pair<D>(lo, 2 * u, m, levels);
          a[s][2 + h] = tc::w4_decode_pair<D>(hi, 2 * u, m, levels);
        }
      }
    }
  }
};

}  // namespace

void w4a16(const uint16_t* x, int M, const uint32_t* codes, const uint32_t* meta, int group, tc::W4Decode decode,
           int N, int K, float alpha, uint16_t* y, GemmWorkspace& ws, int split_k, cudaStream_t stream,
           const float* row_scale) {
  if (M < 1 || N < 8 || N % 8 != 0 || K < 64 || K % 64 != 0 || (group != 16 && group != 32 && group % 64 != 0) ||
      K % group != 0)
    throw Error("W4A16 wgmma GEMM: unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " group=" + std::to_string(group));
  const tc::Problem p{reinterpret_cast<const uint8_t*>(x), int64_t(K) * 2, M, N, row_scale, alpha, y};
  const int gpt = group < 64 ? 64 / group : 1;
  tc::with_decode(decode, [&](auto d) {
    using W = W4Codes<decltype(d)::value>;
    const typename W::Params params{
        tensor_map_2d(codes, 4, uint64_t(K) / 8, uint64_t(N), uint64_t(K) / 2, 8, kRegaRows, Swizzle::none, "W4 codes"),
        tensor_map_2d(meta, 4, uint64_t(N), uint64_t(K / group), uint64_t(N) * 4, kRegaRows, uint32_t(gpt), Swizzle::none,
                      "W4 metadata"),
        group, gpt};
    launch_rega<W>(p, params, ws, split_k, stream);
  });
}

}  // namespace nibble::cuda::wg

#pragma once
// The all-warps wgmma GEMM main loop (sm_90a), for 128-row tiles, and 256-row tiles of the B
// policies with kHeavyDecode: one CTA computes a BM x 128 tile of Y over k-tiles of 64 with two
// warpgroups (BM / 2 rows each) that both dequantize and issue wgmma:
//   - thread 0 loads A and the raw B bytes of a k-tile into one ring slot by TMA (one mbarrier each);
//   - all 256 threads dequantize the staged B k-tile into fp16 once per CTA while the tensor cores
//     run the previous k-tile (two fp16 B buffers, `wgmma.wait_group 1`);
//   - two __syncthreads per k-tile hand the slots and the dequantized tile over.
// At 64 rows it is up to 30% faster than the warp-specialized loop of gemm_wgmma_specialized.cuh,
// which wins from 256 rows on for the light decodes (docs/perf/gemm-notes.md, "w3").
#include "gemm_wgmma_core.cuh"

namespace nibble::cuda::wg {

template <int BM_, int STAGES_, class BOp>
struct AllWarpsCfg {
  static constexpr int BM = BM_, STAGES = STAGES_, THREADS = kDequantThreads, BN = kBN;
  // Split-K by estimated time (auto_splits) for 256-row tiles (the heavier decodes; ~0.9 us or more
  // per k-tile, so the estimate errs towards not splitting); 128-row tiles keep the default rule.
  static constexpr double KTILE_US = BM == 256 ? 0.9 : 0.0;
  static constexpr int MT = BM / 128;  // m64 slices per warpgroup
  static constexpr int A_BYTES = BM * kRowBytes, BH_BYTES = kBN * kRowBytes;
  // + 1024: the dynamic buffer is aligned up to 1024 bytes in the kernel
  static constexpr int SMEM = 1024 + STAGES * (A_BYTES + BOp::kRawBytes) + 2 * BH_BYTES + BOp::kExtraBytes + STAGES * 8;
  static_assert(BM % 128 == 0 && STAGES >= 3 && SMEM <= kSmemLimit, "whole m64 slices for both warpgroups");
};

template <class C, class BOp>
__global__ void __launch_bounds__(C::THREADS, 1)
    wgmma_gemm_kernel_allwarps(tc::MainArgs g, const __grid_constant__ CUtensorMap map_a,
                               const __grid_constant__ typename BOp::Params bp, tc::EpilogueArgs e) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (tc::smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* As = smem;
  uint8_t* Bh = As + C::STAGES * C::A_BYTES;
  uint8_t* Raw = Bh + 2 * C::BH_BYTES;
  uint8_t* extra = Raw + C::STAGES * BOp::kRawBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(extra + BOp::kExtraBytes);
  BOp::init(extra);

  const int m0 = blockIdx.x * C::BM, n0 = blockIdx.y * kBN, split = blockIdx.z;
  const int kt0 = split * g.tiles_per_split;
  const int nk = min(g.tiles_per_split, g.k_tiles - kt0);
  const int wgi = threadIdx.x >> 7;
  const bool issuer = threadIdx.x == 0;
  const uint32_t stage_bytes = C::A_BYTES + BOp::raw_bytes(bp);
  auto load = [&](int slot, int kt) {  // issuer only
    mbar_expect_bytes(full + slot, stage_bytes);
    tma_load_2d(As + slot * C::A_BYTES, &map_a, (kt0 + kt) * kBK, m0, full + slot);
    BOp::load_raw(Raw + slot * BOp::kRawBytes, bp, n0, kt0 + kt, full + slot);
  };

  if (issuer) {
    for (int s = 0; s < C::STAGES; ++s) mbar_init(full + s, 1);
    tc::fence_mbar_init();
  }
  __syncthreads();

  float acc[C::MT][64];  // not zeroed (mma_tile)

  // Slot kt % STAGES of the ring holds A and raw B of k-tile kt; STAGES - 2 tiles are loaded ahead,
  // so a slot is refilled only once the wgmma that read it (two tiles back) has completed.
  if (issuer)
    for (int s = 0; s < C::STAGES - 2 && s < nk; ++s) load(s, s);

  for (int kt = 0; kt < nk; ++kt) {
    const int slot = kt % C::STAGES;
    wgmma_wait<1>();  // this warpgroup's wgmma of k-tile kt - 2 is done (kt - 1 may run)
    __syncthreads();  // ... in both warpgroups: its ring slot and dequantized tile are free
    if (issuer && kt + C::STAGES - 2 < nk) load((kt + C::STAGES - 2) % C::STAGES, kt + C::STAGES - 2);
    mbar_wait(full + slot, (kt / C::STAGES) & 1);

    uint8_t* bh = Bh + (kt & 1) * C::BH_BYTES;
    BOp::dequantize(Raw + slot * BOp::kRawBytes, bh, bp, extra, threadIdx.x);
    fence_proxy_async();  // the dequantized tile (and the raw reads) before the async proxy's accesses
    __syncthreads();

    mma_tile(acc, As + slot * C::A_BYTES + wgi * (C::BM / 2) * kRowBytes, bh, kt == 0);
  }
  finish_tile<C>(e, acc, wgi, m0, n0, split);
#else
  __trap();  // launched only on sm_90 (supported())
#endif
}

}  // namespace nibble::cuda::wg

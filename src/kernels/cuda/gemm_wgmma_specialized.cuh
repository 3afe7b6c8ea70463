#pragma once
// The warp-specialized wgmma GEMM main loop (sm_90a), for 256-row tiles: one CTA computes a
// 256 x 128 tile of Y over k-tiles of 64 with four warpgroups in two roles:
//   - two producer warpgroups: one thread issues the TMA copies of the raw B bytes; all 256 threads
//     turn each staged B k-tile into fp16 once per CTA (the policy's dequantize);
//   - two consumer warpgroups (128 rows of Y each, two m64 slices) issue wgmma; one of their threads
//     also issues the TMA copies of A.
// Every hand-off is an mbarrier, with no CTA-wide barrier in the loop: `full_*` (a slot's TMA
// bytes landed), `ready` (a tile dequantized), `empty_a` / `bh_empty` (the wgmma that read an A
// slot / a dequantized tile completed). setmaxnreg gives the consumers the registers of their
// accumulators and the producers what decoding needs. Against the all-warps loop (every warp
// dequantizes and issues wgmma, two __syncthreads per k-tile), whose warps spent half their stalls
// at those barriers (ncu), this one is 10-15% faster from 256 rows on for nvfp4 and nestedfp and
// level for int4 (docs/perf/gemm-notes.md, "w3"). It is slower at 64 rows, so 128-row tiles keep
// the all-warps loop, and for the heavier decodes (RaZeR's special-value select, NF4's table and
// FP32 multiply: 3-15% slower, producer-bound), so their policies set kHeavyDecode and keep it too.
#include "gemm_wgmma_core.cuh"

namespace nibble::cuda::wg {

constexpr int kProducerRegs = 88, kConsumerRegs = 168;  // per thread after setmaxnreg: 256 x 88 + 256 x 168 = 64K

// Shared memory, three rings and the mbarriers:
//   - A tiles, SA slots (up to 6): loaded by a consumer thread as soon as both consumer
//     warpgroups are done with a slot, SA - 1 tiles ahead of the one they compute;
//   - raw B tiles, SR slots (up to 8, what is left): loaded by producer thread 0 SR - 1 tiles
//     ahead of the one the producers dequantize, each slot freed by the dequantization itself;
//   - BS = 3 dequantized B tiles: the producers can run two tiles ahead of the consumers.
// So no producer thread waits on the consumers except for a free dequantized tile. In the first
// version producer thread 0 also loaded A, waiting there for the consumers to free its slot: a
// round trip per tile on the dequantization's critical path, 1.8x slower than the kernel before
// (ncu: the producers stalled on that wait, the consumers on the tile it delayed).
template <int BM_, class BOp>
struct SpecializedCfg {
  static constexpr int BM = BM_, BN = kBN, THREADS = 512;
  // Split-K by estimated time (auto_splits): ~0.9 us per 64-wide k-tile of a 256 x 128 tile on an
  // H100 (nvfp4, docs/perf/gemm-latest.json: Qwen3-32B down at 512 rows, 80 tiles, one wave).
  static constexpr double KTILE_US = 0.9;
  static constexpr int MT = BM / 128;  // m64 slices per consumer warpgroup
  static constexpr int A_BYTES = BM * kRowBytes, BH_BYTES = kBN * kRowBytes, BS = 3;
  static constexpr int RAW = BOp::kRawBytes;
  static constexpr int BUDGET = kSmemLimit - 1024 - BS * BH_BYTES - BOp::kExtraBytes - 256;  // 1024: alignment
  static constexpr int SA = (BUDGET - 3 * RAW) / A_BYTES < 6 ? (BUDGET - 3 * RAW) / A_BYTES : 6;
  static constexpr int SR = (BUDGET - SA * A_BYTES) / RAW < 8 ? (BUDGET - SA * A_BYTES) / RAW : 8;
  static constexpr int SMEM = kSmemLimit - BUDGET + SA * A_BYTES + SR * RAW;
  static_assert(BM % 128 == 0 && SA >= 3 && SR >= 3, "BM: whole m64 slices for both warpgroups; ring depths");
  static_assert(SMEM <= kSmemLimit && RAW % 128 == 0, "shared memory; 128-byte aligned TMA targets");
};

template <class C, class BOp>
__global__ void __launch_bounds__(C::THREADS, 1)
    wgmma_gemm_kernel_specialized(tc::MainArgs g, const __grid_constant__ CUtensorMap map_a,
                                  const __grid_constant__ typename BOp::Params bp, tc::EpilogueArgs e) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int SA = C::SA, SR = C::SR, BS = C::BS;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (tc::smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* As = smem;
  uint8_t* Bh = As + SA * C::A_BYTES;
  uint8_t* Raw = Bh + BS * C::BH_BYTES;
  uint8_t* extra = Raw + SR * BOp::kRawBytes;
  uint64_t* full_a = reinterpret_cast<uint64_t*>(extra + BOp::kExtraBytes);  // TMA bytes of an A slot landed
  uint64_t* empty_a = full_a + SA;     // the consumers' wgmma that read an A slot completed
  uint64_t* full_raw = empty_a + SA;   // TMA bytes of a raw slot landed
  uint64_t* ready = full_raw + SR;     // a dequantized tile written
  uint64_t* bh_empty = ready + BS;     // the consumers' wgmma that read a dequantized tile completed
  BOp::init(extra);

  const int m0 = blockIdx.x * C::BM, n0 = blockIdx.y * kBN, split = blockIdx.z;
  const int kt0 = split * g.tiles_per_split;
  const int nk = min(g.tiles_per_split, g.k_tiles - kt0);
  constexpr uint32_t kConsumerWarps = 8;
  if (threadIdx.x == 0) {
    for (int s = 0; s < SA; ++s) {
      mbar_init(full_a + s, 1);
      mbar_init(empty_a + s, kConsumerWarps);
    }
    for (int s = 0; s < SR; ++s) mbar_init(full_raw + s, 1);
    for (int b = 0; b < BS; ++b) {
      mbar_init(ready + b, kDequantThreads);
      mbar_init(bh_empty + b, kConsumerWarps);
    }
    tc::fence_mbar_init();
  }
  __syncthreads();  // the only CTA-wide barrier: mbarriers and the policy's tables are set up

  // Phase parity of use u of a ring slot is u & 1; tile j is use j / (ring size) of its slot.
  if (threadIdx.x < kDequantThreads) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    const int pt = threadIdx.x;
    const uint32_t raw_bytes = BOp::raw_bytes(bp);
    auto load = [&](int j) {  // thread 0 only: tile j's raw B, once tile j - SR is dequantized
      const int sr = j % SR;
      if (j >= SR) mbar_wait(ready + (j - SR) % BS, ((j - SR) / BS) & 1);
      mbar_expect_bytes(full_raw + sr, raw_bytes);
      BOp::load_raw(Raw + sr * BOp::kRawBytes, bp, n0, kt0 + j, full_raw + sr);
    };
    if (pt == 0)
      for (int j = 0; j < SR - 1 && j < nk; ++j) load(j);
    for (int kt = 0; kt < nk; ++kt) {
      if (pt == 0 && kt + SR - 1 < nk) load(kt + SR - 1);  // waits for tile kt - 1: just done here
      const int b = kt % BS;
      if (kt >= BS) mbar_wait(bh_empty + b, (kt / BS - 1) & 1);
      mbar_wait(full_raw + kt % SR, (kt / SR) & 1);
      BOp::dequantize(Raw + (kt % SR) * BOp::kRawBytes, Bh + b * C::BH_BYTES, bp, extra, pt);
      fence_proxy_async();  // the dequantized tile (and the raw reads) before the async proxy's accesses
      mbar_arrive(ready + b);
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int c = (threadIdx.x - kDequantThreads) >> 7;  // consumer warpgroup
  float acc[C::MT][64];  // not zeroed (mma_tile)
  const bool issuer = threadIdx.x == kDequantThreads;  // loads the A tiles
  auto load_a = [&](int j) {
    mbar_expect_bytes(full_a + j % SA, C::A_BYTES);
    tma_load_2d(As + (j % SA) * C::A_BYTES, &map_a, (kt0 + j) * kBK, m0, full_a + j % SA);
  };
  if (issuer)
    for (int j = 0; j < SA && j < nk; ++j) load_a(j);

  for (int kt = 0; kt < nk; ++kt) {
    const int sa = kt % SA, b = kt % BS;
    mbar_wait(full_a + sa, (kt / SA) & 1);  // A landed
    mbar_wait(ready + b, (kt / BS) & 1);    // B dequantized
    mma_tile(acc, As + sa * C::A_BYTES + c * (C::BM / 2) * kRowBytes, Bh + b * C::BH_BYTES, kt == 0);
    wgmma_wait<1>();  // this warp's wgmma of k-tile kt - 1 is done: its slot and tile are free
    if (kt > 0 && (threadIdx.x & 31) == 0) {
      mbar_arrive(empty_a + (kt - 1) % SA);
      mbar_arrive(bh_empty + (kt - 1) % BS);
    }
    if (issuer && kt > 0 && kt - 1 + SA < nk) {  // tile kt - 1's slot, once both warpgroups are done
      mbar_wait(empty_a + (kt - 1) % SA, ((kt - 1) / SA) & 1);
      load_a(kt - 1 + SA);
    }
  }
  finish_tile<C>(e, acc, c, m0, n0, split);
#else
  __trap();  // launched only on sm_90 (supported())
#endif
}

}  // namespace nibble::cuda::wg

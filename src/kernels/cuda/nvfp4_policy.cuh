#pragma once
// NVFP4 and NVFP4-RaZeR weights (block 16, one scale byte per block), serialized layout as is:
// codes row-major two per byte, scales row-major [N][K/16]. A lane chunk is 32 elements (16 bytes)
// and its two scale bytes. Two decoders: bit placement into fp16 (Bits) or a shared-memory table
// (Lut); RaZeR's scale byte is E3M3 + sv magnitude bit 6 + sv sign bit 7, nvfp4's is E4M3. The
// bit decoder builds a block's special value from GemvArgs::sv_h2 (made on the host) with one
// select and one sign flip, and patches it into the -0 codes.
#include "decode.cuh"
#include "gemv_args.h"

namespace nibble::cuda::detail {

template <bool kRazer>
struct Nvfp4Base {
  static constexpr int kChunkK = 32, kChunkBytes = 16, kGroupK = 16;
  static __device__ __forceinline__ size_t q_row_bytes(int K) { return size_t(K) / 2; }
  static __device__ __forceinline__ size_t s_row_bytes(int K) { return size_t(K) / 16; }
  struct Meta {
    uint32_t s;  // the chunk's two scale bytes
  };
  static __device__ __forceinline__ Meta load_meta(const uint8_t* srow, const GemvArgs&, int c) {
    return {__ldg(reinterpret_cast<const unsigned short*>(srow) + c)};
  }
  static __device__ __forceinline__ uint32_t byte_of(const Meta& m, int g) { return (m.s >> (8 * g)) & 0xFFu; }
  static __device__ __forceinline__ float block_scale(const Meta& m, int g) {
    return kRazer ? e3m3_to_float(byte_of(m, g)) : e4m3_to_float(byte_of(m, g));
  }
  // RaZeR: the block's special value (x 2^-14, fp16 in both halves): magnitude b if bit 6, sign bit 7.
  static __device__ __forceinline__ uint32_t block_sv_h2(const Meta& m, int g, const GemvArgs& a) {
    const uint32_t b = byte_of(m, g);
    return ((b & 0x40u) ? a.sv_h2[1] : a.sv_h2[0]) ^ ((b & 0x80u) * 0x01000100u);
  }
};

template <bool kRazer>
struct Nvfp4Bits : Nvfp4Base<kRazer> {
  using B = Nvfp4Base<kRazer>;
  static constexpr int kLutSize = 0;
  static constexpr float kOutFactor = kFp4BitsFactor, kHalfFactor = 64.0f;  // decode8_h: value * 2^-6
  // decode8_h's bit placement (decode.cuh): plain NVFP4 by rotation, measured faster in the one-row
  // GEMV (batch 1 +1.4 / +1.6%, docs/perf/fp4-rotate-2026-11-29.md); RaZeR's (not measured) and the
  // tensor-core decode_h below (slower at 4 tokens) by shifts.
  static constexpr Fp4Place kPlace = kRazer ? Fp4Place::shifts : Fp4Place::rotate;
  static __device__ __forceinline__ float scale(const typename B::Meta& m, int g, const GemvArgs&) {
    return B::block_scale(m, g);
  }
  static __device__ __forceinline__ void decode8_h(const uint4 (&w)[1], int e, const typename B::Meta& m,
                                                   const GemvArgs& a, uint32_t (&h)[4]) {
    const uint32_t x = word_of(w, e);
    const uint32_t sv2 = kRazer ? B::block_sv_h2(m, e / 2, a) : 0u;
    const NibbleFlags fl = neg0_flags(x, kRazer);
#pragma unroll
    for (int p = 0; p < 4; ++p) h[p] = hmul2_bits(fp4x2_special_h<kPlace>(x, p, fl, sv2, kRazer), kFp16TwoPow8x2);
  }
  static __device__ float lut_entry(const GemvArgs&, int) { return 0.0f; }
  // Tensor-core path: four fp16 pairs (A registers; odd pairs are row g + 8, meta m1), already
  // times the block scale: value * 2^-14 * scale is exact in fp16 (FP4 and RaZeR's special values
  // are multiples of 0.5 with at most 5 significant bits, the scales multiples of 2^-9 with 4, so
  // every product is a multiple of 2^-24, fp16's smallest step, with at most 9 significant bits,
  // and at most 9.5 * 448 * 2^-14 < 1).
  static constexpr int kTileScaleBytes = 4;
  static constexpr bool kScaledH = true;
  // One row's block scales of a 64-element chunk for this lane (tile_meta's metadata of its two
  // halves, each with the lane's block in both bytes): S[j] for tile j, the first half's block for
  // tiles 0 and 1, the second's for 2 and 3. Bytes 0 and 2 of the joined word are the two blocks,
  // so one conversion serves the row (converting all four bytes: nvfp4 GEMVs at 4 and 16 tokens
  // 1.01-1.04x slower, docs/perf/gemv16-prefetch-2026-11-30.md).
  static __device__ __forceinline__ void chunk_scales_h(const typename B::Meta& lo, const typename B::Meta& hi,
                                                        uint32_t (&S)[4]) {
    const uint32_t bytes = lo.s | hi.s << 16;
    const uint32_t pair = kRazer ? minifloat_pair_h2<6, 12>(bytes) : minifloat_pair_h2<7, 8>(bytes);
    S[0] = S[1] = half_dup(pair, false), S[2] = S[3] = half_dup(pair, true);
  }
  // s0, s1: the tile's scales of rows g and g + 8 (chunk_scales_h); m0, m1: their metadata of the
  // tile's half chunk (the lane's block in byte 0).
  static __device__ __forceinline__ void decode_h(uint32_t x, const typename B::Meta& m0, const typename B::Meta& m1,
                                                  uint32_t s0, uint32_t s1, const GemvArgs& a, uint32_t (&A)[4]) {
    const uint32_t sv0 = kRazer ? B::block_sv_h2(m0, 0, a) : 0u, sv1 = kRazer ? B::block_sv_h2(m1, 0, a) : 0u;
    const NibbleFlags fl = neg0_flags(x, kRazer);
#pragma unroll
    for (int p = 0; p < 4; ++p) A[p] = hmul2_bits(fp4x2_special_h(x, p, fl, (p & 1) ? sv1 : sv0, kRazer), (p & 1) ? s1 : s0);
  }
};

// NVFP4-RaZeR on CUDA cores with its codes looked up (razer_fp4x8_table_h): the same fp16 values
// as Nvfp4Bits<true>'s decode8_h (value x 2^-6) with about two thirds of the operations, for
// special values that fit an fp16 high byte (launch_nvfp4_razer_bits checks).
struct Nvfp4RazerTable : Nvfp4Bits<true> {
  static __device__ __forceinline__ void decode8_h(const uint4 (&w)[1], int e, const B::Meta& m, const GemvArgs& a,
                                                   uint32_t (&h)[4]) {
    razer_fp4x8_table_h<6>(word_of(w, e), sv_hi_byte<6>(B::block_sv_h2(m, e / 2, a)), h);
  }
};

template <bool kRazer>
struct Nvfp4Lut : Nvfp4Base<kRazer> {
  using B = Nvfp4Base<kRazer>;
  // nvfp4: 16 values. RaZeR: 4 tables of 16 (index: scale byte bits 7..6, then the code), entry 8
  // of each holding its special value.
  static constexpr int kLutSize = kRazer ? 64 : 16;
  static constexpr float kOutFactor = 1.0f;
  static __device__ float lut_entry(const GemvArgs& a, int i) {
    const int code = i & 15, sel = i >> 4;
    if (kRazer && code == 8) return (sel & 2) ? -((sel & 1) ? a.sv_b : a.sv_a) : ((sel & 1) ? a.sv_b : a.sv_a);
    return fp4_value(code);
  }
  static __device__ __forceinline__ float scale(const typename B::Meta& m, int g, const GemvArgs&) {
    return B::block_scale(m, g);
  }
  static __device__ __forceinline__ void decode8(const uint4 (&w)[1], int e, const typename B::Meta& m,
                                                 const GemvArgs&, const float* lut, float2 (&d)[4]) {
    const uint32_t x = word_of(w, e);
    const float* t = kRazer ? lut + ((B::byte_of(m, e / 2) >> 6) << 4) : lut;
#pragma unroll
    for (int p = 0; p < 4; ++p) d[p] = make_float2(t[(x >> (4 * p)) & 15u], t[(x >> (4 * p + 16)) & 15u]);
  }
};

}  // namespace nibble::cuda::detail

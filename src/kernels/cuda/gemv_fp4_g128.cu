// FP4 group-128 GEMV, plain (fp4-g128) and RaZeR (razer-fp4-g128), on the codes as serialized:
// the bit-placement decode of NVFP4 (decode.cuh), RaZeR's -0 codes taking the group's special
// value by the same select as nvfp4-razer's; on CUDA cores RaZeR looks its codes up in byte
// tables where its special values allow. FP16 scale words as serialized (RaZeR: bit 15 the sv
// sign, bit 14 the sv magnitude select, the rest the scale).
// Paper 001's Listing 1 decodes repacked {E1 E0 M S} nibbles instead; it needs about twice the
// operations per pair, and the one-row GEMV is issue-bound (docs/perf/fp4-g128-bits-2026-11-27.md).
#include "decode_stack.cuh"
#include "gemv.cuh"
#include "gemv_mma.cuh"
#include "gemv_stream.cuh"

namespace nibble::cuda::detail {

template <bool kRazer>
struct Fp4G128 {
  static constexpr int kChunkK = 32, kChunkBytes = 16, kGroupK = 128, kLutSize = 0;
  // Tensor cores: value * 2^-14 (fp16 bit placement); decode8_h: value * 2^-7.
  static constexpr float kOutFactor = kFp4BitsFactor, kHalfFactor = 128.0f;
  static __device__ __forceinline__ size_t q_row_bytes(int K) { return size_t(K) / 2; }
  static __device__ __forceinline__ size_t s_row_bytes(int K) { return size_t(K) / 128 * 2; }
  struct Meta {
    float s;
    uint32_t svh;  // RaZeR: the group's special value x 2^-14, fp16 bits in both halves
  };
  static constexpr int kMetaBytes = 2;  // one group's metadata element (the tile kernels' copies)
  static __device__ __forceinline__ Meta meta_of(uint32_t word, const GemvArgs& a) {
    if (!kRazer) return {__half2float(__ushort_as_half(uint16_t(word))), 0u};
    const uint32_t sv = ((word & 0x4000u) ? a.sv_h2[1] : a.sv_h2[0]) ^ ((word & 0x8000u) ? 0x80008000u : 0u);
    return {__half2float(__ushort_as_half(uint16_t(word & 0x3FFFu))), sv};
  }
  static __device__ __forceinline__ Meta load_meta(const uint8_t* srow, const GemvArgs& a, int c) {
    return meta_of(__ldg(reinterpret_cast<const unsigned short*>(srow) + c / 4), a);
  }
  static __device__ __forceinline__ float scale(const Meta& m, int, const GemvArgs&) { return m.s; }
  static __device__ __forceinline__ void decode8_h(const uint4 (&w)[1], int e, const Meta& m, const GemvArgs&,
                                                   uint32_t (&h)[4]) {
    const uint32_t x = word_of(w, e);
    const NibbleFlags fl = neg0_flags(x, kRazer);
#pragma unroll
    for (int p = 0; p < 4; ++p) h[p] = hmul2_bits(fp4x2_special_h(x, p, fl, m.svh, kRazer), kFp16TwoPow7x2);
  }
  static __device__ float lut_entry(const GemvArgs&, int) { return 0.0f; }
  static constexpr bool kScaledH = false;  // scaled in FP32 once per group
  static __device__ __forceinline__ void decode_h(uint32_t x, const Meta& m0, const Meta& m1, const GemvArgs&,
                                                  uint32_t (&A)[4]) {
    const NibbleFlags fl = neg0_flags(x, kRazer);
#pragma unroll
    for (int p = 0; p < 4; ++p) A[p] = fp4x2_special_h(x, p, fl, (p & 1) ? m1.svh : m0.svh, kRazer);
  }
};

// RaZeR-FP4-g128 on CUDA cores with its codes looked up (razer_fp4x8_table_h): the same values
// as Fp4G128<true>'s decode8_h (value x 2^-7) with fewer operations, for special values that fit
// an fp16 high byte (launch_razer_fp4_g128 checks).
struct Fp4G128RazerTable : Fp4G128<true> {
  static __device__ __forceinline__ void decode8_h(const uint4 (&w)[1], int e, const Meta& m, const GemvArgs&,
                                                   uint32_t (&h)[4]) {
    razer_fp4x8_table_h<7>(word_of(w, e), sv_hi_byte<7>(m.svh), h);
  }
};

void launch_fp4_g128(const GemvArgs& a, int r, cudaStream_t s) { launch_fp4_gemv<Fp4G128<false>>(a, r, s); }
void launch_razer_fp4_g128(const GemvArgs& a, int r, cudaStream_t s) {
  launch_razer_gemv<Fp4G128RazerTable, Fp4G128<true>>(a, r, s);
}
void launch_mma_fp4_g128(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Fp4G128<false>>(a, s); }
void launch_mma_razer_fp4_g128(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Fp4G128<true>>(a, s); }
void launch_stream_fp4_g128(const GemvArgs& a, cudaStream_t s) {
  launch_gemv_stream<Fp4G128<false>, WeightKind::fp4_g128>(a, s);
}
void launch_stream_razer_fp4_g128(const GemvArgs& a, cudaStream_t s) {
  launch_gemv_stream<Fp4G128<true>, WeightKind::razer_fp4_g128>(a, s);
}
void launch_stack_fp4_g128(const StackArgs& a, cudaStream_t s) { launch_decode_stack<Fp4G128<false>>(a, s); }

}  // namespace nibble::cuda::detail

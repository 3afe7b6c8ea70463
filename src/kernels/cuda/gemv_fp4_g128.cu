// FP4 group-128 GEMV, plain (fp4-g128) and RaZeR (razer-fp4-g128), with paper 001's bit-trick
// decode (Listing 1) on repacked {E1 E0 M S} nibbles (see fp4x2_ems). Kernel layout: codes
// row-major two per byte, each nibble repacked; the FP16 scale words as serialized (RaZeR: bit 15
// the sv sign, bit 14 the sv magnitude select, the rest the scale).
#include "gemv.cuh"
#include "gemv_mma.cuh"

namespace nibble::cuda::detail {

template <bool kRazer>
struct Fp4G128 {
  static constexpr int kChunkK = 32, kChunkBytes = 16, kGroupK = 128, kLutSize = 0;
  static constexpr float kOutFactor = 1.0f, kHalfFactor = 128.0f;  // decode8_h: value * 2^-7
  static __device__ __forceinline__ size_t q_row_bytes(int K) { return size_t(K) / 2; }
  static __device__ __forceinline__ size_t s_row_bytes(int K) { return size_t(K) / 128 * 2; }
  struct Meta {
    float s;
    uint32_t svh;  // the group's special value, fp16 bits in both halves (RaZeR)
  };
  static __device__ __forceinline__ Meta load_meta(const uint8_t* srow, const GemvArgs& a, int c) {
    const uint32_t word = __ldg(reinterpret_cast<const unsigned short*>(srow) + c / 4);
    if (!kRazer) return {__half2float(__ushort_as_half(uint16_t(word))), 0u};
    const float mag = (word & 0x4000u) ? a.sv_b : a.sv_a;
    const uint32_t h = __half_as_ushort(__float2half_rn((word & 0x8000u) ? -mag : mag));
    return {__half2float(__ushort_as_half(uint16_t(word & 0x3FFFu))), h | (h << 16)};
  }
  static __device__ __forceinline__ float scale(const Meta& m, int, const GemvArgs&) { return m.s; }
  static __device__ __forceinline__ void decode8_h(const uint4 (&w)[1], int e, const Meta& m, const GemvArgs&,
                                                   uint32_t (&h)[4]) {
    const uint32_t x = word_of(w, e);
    const EmsFlags fl = ems_flags(x);
#pragma unroll
    for (int p = 0; p < 4; ++p) h[p] = hmul2_bits(fp4x2_ems_h(x, p, fl, m.svh, kRazer), kFp16TwoPowMinus7x2);
  }
  static __device__ float lut_entry(const GemvArgs&, int) { return 0.0f; }
  static constexpr bool kScaledH = false;  // scaled in FP32 once per group
  static __device__ __forceinline__ void decode_h(uint32_t x, const Meta& m0, const Meta& m1, int, const GemvArgs&,
                                                  uint32_t (&A)[4]) {
    const EmsFlags fl = ems_flags(x);
#pragma unroll
    for (int p = 0; p < 4; ++p) A[p] = fp4x2_ems_h(x, p, fl, (p & 1) ? m1.svh : m0.svh, kRazer);
  }
};

void launch_fp4_g128(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Fp4G128<false>>(a, r, s); }
void launch_razer_fp4_g128(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Fp4G128<true>>(a, r, s); }
void launch_mma_fp4_g128(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Fp4G128<false>>(a, s); }
void launch_mma_razer_fp4_g128(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Fp4G128<true>>(a, s); }

}  // namespace nibble::cuda::detail

// RaZeR FP3 (E2M0) group-128 GEMV. Kernel layout per row and group of 128: 48 bytes = three
// 16-byte vectors, the sign planes, the exponent-bit-0 planes and the exponent-bit-1 planes of the
// group's four 32-element sub-blocks. Inside a plane word, element 8g + i (i < 4) sits at bit
// 4g + i and element 8g + 4 + i at bit 16 + 4g + i, so one shift lines up the pair (8g+i, 8g+i+4)
// that the GEMV multiplies together (repack: fp3_plane_bit in device_weight.cpp).
// Scales: the FP16 words as serialized (bit 15 sv sign, bit 14 sv select, rest the scale).
#include "gemv.cuh"

namespace nibble::cuda::detail {

struct RazerFp3G128 {
  static constexpr int kChunkK = 128, kChunkBytes = 48, kGroupK = 128, kLutSize = 0;
  static constexpr float kOutFactor = kFp4BitsFactor;  // fp3x2_planes also yields value * 2^-14
  static __device__ __forceinline__ size_t q_row_bytes(int K) { return size_t(K) / 128 * 48; }
  static __device__ __forceinline__ size_t s_row_bytes(int K) { return size_t(K) / 128 * 2; }
  struct Meta {
    float s, sv;  // sv already times 2^-14
  };
  static __device__ __forceinline__ Meta load_meta(const uint8_t* srow, const GemvArgs& a, int c) {
    const uint32_t word = __ldg(reinterpret_cast<const unsigned short*>(srow) + c);
    const float mag = ((word & 0x4000u) ? a.sv_b : a.sv_a) * (1.0f / kFp4BitsFactor);
    return {__half2float(__ushort_as_half(uint16_t(word & 0x3FFFu))), (word & 0x8000u) ? -mag : mag};
  }
  static __device__ __forceinline__ float scale(const Meta& m, int, const GemvArgs&) { return m.s; }
  static __device__ __forceinline__ void decode8(const uint4 (&w)[3], int e, const Meta& m, const GemvArgs&,
                                                 const float*, float2 (&d)[4]) {
    const int sb = e / 4, g = e % 4;  // 32-element sub-block, 8-element step inside it
    const uint32_t sgn = word_of(w, sb), e0 = word_of(w, 4 + sb), e1 = word_of(w, 8 + sb);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      d[p] = fp3x2_planes(sgn, e0, e1, 4 * g + p);
      d[p].x = neg0_to(d[p].x, m.sv);
      d[p].y = neg0_to(d[p].y, m.sv);
    }
  }
  static __device__ float lut_entry(const GemvArgs&, int) { return 0.0f; }
};

void launch_razer_fp3_g128(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<RazerFp3G128>(a, r, s); }

}  // namespace nibble::cuda::detail

#pragma once
// The W4A16 weight decode, shared by the mma.sync GEMM (gemm_w4a16.cu) and the wgmma GEMM
// (gemm_wgmma_w4a16.cu) so both multiply bit-identical fp16 weights. Metadata word per (group,
// column): low half the fp16 group scale, high half the fp16 special value (FP4: code -0 decodes to
// it; 0 for plain formats) or 1024 + zero point (INT4); for NF4 the whole word is the FP32 absmax.
#include <cuda_fp16.h>

#include <cstdint>

#include "decode.cuh"
#include "gemm_kernels.cuh"

namespace nibble::cuda::tc {

// Codes of pair p (nibbles p and p + 4 of w) -> two fp16 weights times the group scale.
template <W4Decode D>
__device__ __forceinline__ uint32_t w4_decode_pair(uint32_t w, int p, uint32_t meta, const float* levels) {
  const uint32_t x = w >> (4 * p);
  if constexpr (D == W4Decode::nf4) {  // level * absmax in FP32, rounded once to fp16
    const float s = __uint_as_float(meta);
    const __half2 r = __floats2half2_rn(levels[x & 0xF] * s, levels[(x >> 16) & 0xF] * s);
    return detail::half2_bits(r);
  }
  const __half2 scale = __halves2half2(__ushort_as_half(uint16_t(meta)), __ushort_as_half(uint16_t(meta)));
  const uint32_t hi = __byte_perm(meta, 0, 0x3232);
  __half2 v;
  if constexpr (D == W4Decode::fp4 || D == W4Decode::fp4_special) {
    // S EEM -> fp16 S 000EE M000000000: the FP4 value times 2^-14, subnormals included.
    const uint32_t h = ((x & 0x00080008u) << 12) | ((x & 0x00070007u) << 9);
    const __half2 f = __hmul2(detail::bits_half2(h), __float2half2_rn(16384.0f));
    if constexpr (D == W4Decode::fp4_special) {  // -0 is the special value (5 more instructions)
      const uint32_t special = __vcmpeq2(h, 0x80008000u);
      v = detail::bits_half2((detail::half2_bits(f) & ~special) | (hi & special));
    } else {
      v = f;
    }
  } else {
    const uint32_t h = detail::and_or<0x000F000Fu, 0x64006400u>(x);  // fp16 1024 + q, one LOP3
    v = __hsub2(detail::bits_half2(h), detail::bits_half2(hi));
  }
  return detail::half2_bits(__hmul2(v, scale));
}

}  // namespace nibble::cuda::tc

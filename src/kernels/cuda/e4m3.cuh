#pragma once
// E4M3 ("fn") on the device exactly as the CPU format library rounds it: the encoder takes a
// float64 quotient (as formats/scale_codes.h's minifloat_code does), so codes match bit for bit.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace nibble::cuda::detail {

// Nearest E4M3 code of a >= 0, ties to even, saturating at 0x7E (448).
__device__ inline uint32_t e4m3_code(double a) {
  constexpr int emin = -6;
  const uint64_t bits = uint64_t(__double_as_longlong(a));
  const int e = int(bits >> 52) - 1023;
  uint32_t code;
  if (e < emin) {
    code = uint32_t(rint(a * 512.0));  // subnormal: a / 2^-9
  } else {
    const uint64_t mant = bits & ((uint64_t(1) << 52) - 1), half = uint64_t(1) << 48;
    code = (uint32_t(e - emin + 1) << 3) | uint32_t(mant >> 49);
    const uint64_t rem = mant & ((uint64_t(1) << 49) - 1);
    code += (rem > half || (rem == half && (code & 1))) ? 1u : 0u;
  }
  return code > 0x7Eu ? 0x7Eu : code;
}

// The signed code of r (the sign of -0 kept, as the CPU's e4m3_signed_code does).
__device__ inline uint32_t e4m3_signed_code(double r) {
  return e4m3_code(fabs(r)) | (signbit(r) ? 0x80u : 0u);
}

// Value of a non-negative code (bit 7 clear).
__device__ inline float e4m3_value(uint32_t c) {
  const int e = (c >> 3) & 0xF, m = c & 7;
  return e == 0 ? ldexpf(m / 8.0f, -6) : ldexpf(1.0f + m / 8.0f, e - 7);
}

// Eight E4M3 codes (element i in byte i) as eight fp16 (exact), two per cvt.
__device__ __forceinline__ uint4 e4m3x8_to_half8(const uint2& w) {
  uint32_t h[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t((i < 2 ? w.x : w.y) >> (16 * (i & 1))), __NV_E4M3);
    h[i] = uint32_t(r.x) | uint32_t(r.y) << 16;
  }
  return make_uint4(h[0], h[1], h[2], h[3]);
}

}  // namespace nibble::cuda::detail

#pragma once
// Register-only decoders: 4-bit / 3-bit element codes and block scales to numbers.
//
// Every element decoder turns one 32-bit word of eight 4-bit codes (element i in bits 4i..4i+3)
// into four pairs: pair p holds elements p and p + 4, so one shift lines both codes up on the two
// 16-bit halves and a single LOP3 builds two fp16 bit patterns at once. The GEMV pairs X the
// same way. Shift counts are compile-time constants once the callers' loops unroll.
#include <cuda_fp16.h>

#include <cstdint>

#include "half_bits.cuh"

namespace nibble::cuda::detail {

// x shifted left by s (right by -s when s < 0).
__device__ __forceinline__ uint32_t shl(uint32_t x, int s) { return s >= 0 ? x << s : x >> -s; }

// FP4 E2M1 value of code c (c & 8 is the sign).
__device__ __forceinline__ float fp4_value(int c) {
  const int em = c & 7;
  const float mag = em < 2 ? 0.5f * em : float(1 << ((em >> 1) - 1)) * (1.0f + 0.5f * (em & 1));
  return (c & 8) ? -mag : mag;
}

// x rotated left by s (any s; a constant once loops unroll: one SHF).
__device__ __forceinline__ uint32_t rotl(uint32_t x, int s) { return __funnelshift_l(x, x, unsigned(s) & 31u); }

// FP4 E2M1, OCP code layout S EE M. Placing S at fp16 bit 15 and EEM at bits 11..9 gives an fp16
// equal to value * 2^-14 for every code, subnormal 0.5 included (fp16's own subnormal); the caller
// multiplies the 2^14 back in once, after the FP32 sums. Code 1000 (-0) decodes to -0.0.
// Two ways to place the bits, the same result; which is faster depends on the kernel (measured,
// docs/perf/fp4-rotate-2026-11-29.md):
// - shifts: S and EEM of pair p each shifted (by 12 - 4p and 9 - 4p) and masked, one LOP3 per pair
//   with one mask in a register.
// - rotate: ws = w rotated by 3 puts every S 3 places up; one LOP3 per two pairs takes the S bits of
//   pairs (0, 2) or (1, 3) from ws and the rest from w (neither pair's EEM bits sit where the other's
//   S bits land); one rotate and one AND then place a pair. Fewer instructions in all (SASS of the
//   one-row fp4-g128 GEMV 816 -> 800) but more SHF (62 -> 75): work moves from the FMA-heavy pipe
//   (the shift form's left shifts as IMAD.SHL) to the ALU pipe, the loops' busiest (ncu). Faster in
//   NVFP4's one-row GEMV, slower in those of fp4-g128 and mxfp4 and in the tensor-core GEMV at 4
//   tokens, so only NVFP4's one-row decoder takes it.
// The compiler computes ws and the two picks once per word (the expressions repeat for every p).
enum class Fp4Place { shifts, rotate };
template <Fp4Place kPlace = Fp4Place::shifts>
__device__ __forceinline__ uint32_t fp4x2_bits_h(uint32_t w, int p) {
  if constexpr (kPlace == Fp4Place::shifts) {
    return (shl(w, 12 - 4 * p) & 0x80008000u) | (shl(w, 9 - 4 * p) & 0x0E000E00u);
  } else {
    const uint32_t sign_at = (p & 1) ? 0x04040404u : 0x40404040u;  // S bits of pairs 1, 3 / 0, 2 in ws
    const uint32_t t = (rotl(w, 3) & sign_at) | (w & ~sign_at);
    return rotl(t, 9 - 4 * p) & 0x8E008E00u;
  }
}

// Eight E2M1 codes as E4M3 bytes, S at bit 7 and EEM at bits 4..2: with E4M3's bias of 7 that is
// value * 2^-6 for every code, the subnormal 0.5 included (E4M3's own subnormal); sm_89+ converts
// two such bytes to an fp16 pair in one instruction. Bytes of the even elements come from w by two
// shifts, of the odd ones by one, so the pairs are elements (0, 2), (4, 6), (1, 3), (5, 7).
__device__ __forceinline__ void fp4x8_e4m3_h(uint32_t w, uint32_t (&h)[4]) {
  const uint32_t lo = ((w << 4) & 0x80808080u) | ((w << 2) & 0x1C1C1C1Cu);  // elements 0, 2, 4, 6
  const uint32_t hi = (w & 0x80808080u) | ((w >> 2) & 0x1C1C1C1Cu);         // elements 1, 3, 5, 7
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  h[0] = h[1] = h[2] = h[3] = lo ^ hi;
  __trap();  // no FP8 conversion before sm_89: the launchers pick this decoder on 8.9+ only
#else
  asm("{\n\t.reg .b16 a, b, c, d;\n\t"
      "mov.b32 {a, b}, %4;\n\tmov.b32 {c, d}, %5;\n\t"
      "cvt.rn.f16x2.e4m3x2 %0, a;\n\tcvt.rn.f16x2.e4m3x2 %1, b;\n\t"
      "cvt.rn.f16x2.e4m3x2 %2, c;\n\tcvt.rn.f16x2.e4m3x2 %3, d;\n\t}"
      : "=r"(h[0]), "=r"(h[1]), "=r"(h[2]), "=r"(h[3])
      : "r"(lo), "r"(hi));
#endif
}

// Special codes found on the code word itself, not per element: a flag word has bit 3 of every
// flagged nibble set (SWAR, three operations for eight codes). pair_mask turns the flags of decode
// pair p (nibbles p and p + 4) into 0xFFFF half masks with one PRMT in sign-replicate mode.
struct NibbleFlags {
  uint32_t f, f4;  // flags, and flags << 4
};
__device__ __forceinline__ NibbleFlags make_flags(uint32_t f) { return {f, f << 4}; }
// Nibbles equal to 1000 (FP4 -0, RaZeR's special value).
__device__ __forceinline__ uint32_t nibble_eq8(uint32_t w) {
  return ~((w & 0x77777777u) + 0x77777777u) & w & 0x88888888u;
}
// Bytes of {b, a} (a: 0-3, b: 4-7) picked by the four selector nibbles of sel (bit 3: the picked
// byte's sign bit in all eight bits).
__device__ __forceinline__ uint32_t prmt2(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
__device__ __forceinline__ uint32_t pair_mask(const NibbleFlags& fl, int p) {
  // pair p's flags sit at bits 4p + 3 and 4p + 19: bytes 0/2 (p < 2) or 1/3, bit 7 after << 4 if p even
  const uint32_t src = (p & 1) ? fl.f : fl.f4;
  return prmt2(src, 0u, p < 2 ? 0xAA88u : 0xBB99u);
}

// 0xFF in byte i where code 4h + i of x (i = 0..3; element i in bits 4i..4i+3) has bit 3 set, for
// merging the lookups of a 16-entry byte table done as two 8-entry PRMTs. x4 = x << 4: bits 4i + 3
// of x sit at a byte's top in x or x4, and PRMT's sign-replicate mode spreads them.
__device__ __forceinline__ uint32_t code_bit3_bytes(uint32_t x, uint32_t x4, int h) {
  return prmt2(x, x4, h ? 0xBFAEu : 0x9D8Cu);
}
// fp16 pair h with the halves flagged in pair p replaced by the matching half of sv2.
__device__ __forceinline__ uint32_t select_h(uint32_t h, const NibbleFlags& fl, int p, uint32_t sv2) {
  const uint32_t m = pair_mask(fl, p);
  return (h & ~m) | (sv2 & m);
}
// Flags of the -0 codes of a word (RaZeR's special value); none for plain FP4.
__device__ __forceinline__ NibbleFlags neg0_flags(uint32_t w, bool razer) {
  return razer ? make_flags(nibble_eq8(w)) : NibbleFlags{0, 0};
}
// FP4 pair p (bit placement, value * 2^-14) with RaZeR's -0 codes (flagged in fl) replaced by
// the block's special value sv2 (x 2^-14, both halves); razer = false: plain FP4, -0 stays -0.0.
template <Fp4Place kPlace = Fp4Place::shifts>
__device__ __forceinline__ uint32_t fp4x2_special_h(uint32_t w, int p, const NibbleFlags& fl, uint32_t sv2, bool razer) {
  const uint32_t v = fp4x2_bits_h<kPlace>(w, p);
  return razer ? select_h(v, fl, p, sv2) : v;
}
constexpr float kFp4BitsFactor = 16384.0f;  // 2^14
// 2^7 and 2^8 in both halves of an fp16 pair
constexpr uint32_t kFp16TwoPow7x2 = 0x58005800u, kFp16TwoPow8x2 = 0x5C005C00u;

// FP4 E2M1 magnitude m (0..7) times 2^-k as an fp16 high byte (the low byte is 0: the values have
// at most two significant bits, and k <= 13 keeps 0.5 * 2^-k a normal fp16).
constexpr uint32_t fp4_mag_hi_byte(int m, int k) {
  const int exp = m == 1 ? -1 : (m >> 1) - 1;  // value 2^exp * (1 + mant / 2); m = 1 is 0.5
  const int mant = m >= 2 ? (m & 1) : 0;
  return m == 0 ? 0u : uint32_t((exp - k + 15) << 2 | mant << 1);
}
// The high bytes of magnitudes m0 .. m0 + 3 (times 2^-k), each OR-ed with sign, as one table word.
constexpr uint32_t fp4_mag_hi_bytes4(int m0, int k, uint32_t sign) {
  uint32_t w = 0;
  for (int i = 0; i < 4; ++i) w |= (fp4_mag_hi_byte(m0 + i, k) | sign) << (8 * i);
  return w;
}
// A special value x 2^-14 (fp16 bits, sign included, in the low half of sv2) as the fp16 high
// byte of sv x 2^-k; exact where its low byte is 0 (razer_sv_fits_hi_byte).
template <int k>
__device__ __forceinline__ uint32_t sv_hi_byte(uint32_t sv2) {
  return ((sv2 >> 8) & 0xFFu) + uint32_t(14 - k) * 4u;  // exponent + (14 - k); sv2 is normal
}

// RaZeR's sixteen FP4 codes (S EEM, -0 the special value) of x as four fp16 pairs (pair p:
// elements p and p + 4) equal to value x 2^-k, looked up instead of built. Per four codes, two
// PRMTs take their fp16 high bytes from the 8-byte table of codes 0-7 and from that of codes 8-15
// (entry 0: the special value's byte sv_hi, sign included), a third PRMT marks the codes with bit
// 3 set, and one LOP3 merges them; one PRMT and one AND per pair then place the bytes. About 21
// operations per word, against about 32 for bit placement with its select and scaling. Exact
// where the special values' fp16 low bytes are 0 (at most three significant bits, as the default
// 5 and 8; razer_sv_fits_hi_byte): the caller checks.
template <int k>
__device__ __forceinline__ void razer_fp4x8_table_h(uint32_t x, uint32_t sv_hi, uint32_t (&h)[4]) {
  static_assert(k >= 0 && k <= 13, "0.5 x 2^-k must be a normal fp16");
  constexpr uint32_t p0 = fp4_mag_hi_bytes4(0, k, 0), p1 = fp4_mag_hi_bytes4(4, k, 0);
  constexpr uint32_t n0 = fp4_mag_hi_bytes4(0, k, 0x80u) & ~0xFFu, n1 = fp4_mag_hi_bytes4(4, k, 0x80u);
  const uint32_t t1 = n0 | sv_hi;
  const uint32_t sel = x & 0x77777777u, x4 = x << 4;
  uint32_t b[2];  // high bytes of codes 0-3, 4-7
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const uint32_t s = hh ? sel >> 16 : sel;
    const uint32_t m = code_bit3_bytes(x, x4, hh);
    b[hh] = (prmt2(p0, p1, s) & ~m) | (prmt2(t1, n1, s) & m);
  }
#pragma unroll
  for (int p = 0; p < 4; ++p) h[p] = prmt2(b[0], b[1], 0x4400u + 0x1111u * p) & 0xFF00FF00u;
}

// fp16 pair product on raw bits (IEEE, subnormals kept).
__device__ __forceinline__ uint32_t hmul2_bits(uint32_t a, uint32_t b) {
  return half2_bits(__hmul2(bits_half2(a), bits_half2(b)));
}

// The low (or high) half of an fp16 pair in both halves; written as a half2 broadcast, not a PRMT,
// so that ptxas can fold it into the operand of the HMUL2 that consumes it.
__device__ __forceinline__ uint32_t half_dup(uint32_t x, bool high) {
  const __half2 h = bits_half2(x);
  return half2_bits(high ? __high2half2(h) : __low2half2(h));
}

// Bytes 0 and 2 of `bytes`, unsigned minifloat scales (3 mantissa bits; E4M3: 7 bits used, E3M3:
// 6), as exact fp16 values in the low and high half: the bits shifted into fp16 are value *
// 2^-kFactorLog2 (E4M3: 8, E3M3: 12), then one exact multiply for both.
template <int kBits, int kFactorLog2>
__device__ __forceinline__ uint32_t minifloat_pair_h2(uint32_t bytes) {
  constexpr uint32_t m = ((1u << kBits) - 1u) << 7, mask = m | m << 16;
  constexpr uint32_t f = uint32_t(15 + kFactorLog2) << 10, f2 = f | f << 16;  // 2^factor as fp16
  return hmul2_bits((bytes << 7) & mask, f2);
}

// RaZeR: -0.0 (the code 1000 / 100) is the special value.
__device__ __forceinline__ float neg0_to(float v, float sv) {
  return __float_as_uint(v) == 0x80000000u ? sv : v;
}

// FP3 E2M0 from three bit planes (sign, exponent bit 0, exponent bit 1) whose bit s holds one
// element and bit s + 16 its partner: fp16 = S << 15 | E << 10 is value * 2^-14, -0 stays -0.0.
__device__ __forceinline__ float2 fp3x2_planes(uint32_t sgn, uint32_t e0, uint32_t e1, int s) {
  uint32_t h = (shl(sgn, 15 - s) & 0x80008000u) | (shl(e1, 11 - s) & 0x08000800u) |
               (shl(e0, 10 - s) & 0x04000400u);
  return h2bits_to_float2(h);
}

// (a & kMask) | kOr in one LOP3: written plainly, the compiler spends two (an AND and an OR, each
// with its constant as the immediate); in PTX both constants go in and ptxas keeps one in a register.
template <uint32_t kMask, uint32_t kOr>
__device__ __forceinline__ uint32_t and_or(uint32_t a) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(a), "n"(kMask), "n"(kOr));  // 0xEA: (a & b) | c
  return r;
}

// INT4 pairs by the magic number: unsigned 4-bit codes q as fp16 1024 + q (0x6400 | q), minus the
// zero point's 1024 + z, exactly. Pair p of a word is nibbles p and p + 4; the decoders below take
// all four pairs with one shift in all: pairs 0 and 2 masked from w and w >> 8 (0x000F000F), pairs 1
// and 3 masked in place (0x00F000F0) as 1024 + 16 q, which still lies in the mantissa.

// Pair p of w as an fp16 bit pattern: 1024 + q for pairs 0 and 2, 1024 + 16 q for 1 and 3.
__device__ __forceinline__ __half2 int4x2_magic(uint32_t w, int p) {
  const uint32_t x = p < 2 ? w : w >> 8;
  return bits_half2((p & 1) ? and_or<0x00F000F0u, 0x64006400u>(x) : and_or<0x000F000Fu, 0x64006400u>(x));
}
// The tensor-core GEMV's: pairs 0 and 2 as q - z (zz0: 1024 + z in both halves), pairs 1 and 3 as
// 16 (q - z1) ((1024 + 16 q) - (1024 + 16 z1); zz1: 1024 + z1): exact.
__device__ __forceinline__ void int4x8_minus_zero_h(uint32_t w, __half2 zz0, __half2 zz1, uint32_t (&h)[4]) {
  const __half2 zz16 = __hfma2(zz1, __float2half2_rn(16.0f), __float2half2_rn(-15360.0f));  // 1024 + 16 z1
#pragma unroll
  for (int p = 0; p < 4; ++p) h[p] = half2_bits(__hsub2(int4x2_magic(w, p), (p & 1) ? zz16 : zz0));
}
// The CUDA-core GEMV's: every pair as (q - z) * 2^-8 (gemv.cuh chunk_dot's range) by one HFMA2,
// (1024 + q) * 2^-8 - (1024 + z) * 2^-8 and (1024 + 16 q) * 2^-12 - (1024 + 16 z) * 2^-12: exact.
// nz: -(1024 + z) * 2^-8 in both halves.
__device__ __forceinline__ void int4x8_scaled_minus_zero_h(uint32_t w, __half2 nz, uint32_t (&h)[4]) {
  const __half2 nz16 = __hadd2(nz, __float2half2_rn(3.75f));  // -(1024 + 16 z) * 2^-12 = nz + 3.75
  const __half2 m8 = __float2half2_rn(0x1p-8f), m12 = __float2half2_rn(0x1p-12f);
#pragma unroll
  for (int p = 0; p < 4; ++p) h[p] = half2_bits(__hfma2(int4x2_magic(w, p), (p & 1) ? m12 : m8, (p & 1) ? nz16 : nz));
}

// E4M3 ("fn", positive here) block scale: its bits shifted into fp16 are value * 2^-8.
__device__ __forceinline__ float e4m3_to_float(uint32_t b) {
  return __half2float(__ushort_as_half(uint16_t((b & 0x7Fu) << 7))) * 256.0f;
}
// Unsigned E3M3 (bias 3): shifted into fp16 it is value * 2^-12.
__device__ __forceinline__ float e3m3_to_float(uint32_t b) {
  return __half2float(__ushort_as_half(uint16_t((b & 0x3Fu) << 7))) * 4096.0f;
}
// E8M0: 2^(e - 127); e = 0 is 2^-127 (an FP32 subnormal).
__device__ __forceinline__ float e8m0_to_float(uint32_t e) {
  return e ? __uint_as_float(e << 23) : __uint_as_float(0x00400000u);
}

}  // namespace nibble::cuda::detail

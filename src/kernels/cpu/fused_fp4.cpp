// Fused decode-dot for the FP4 E2M1 block formats (nvfp4, nvfp4-4over6, nvfp4-razer, mxfp4,
// fp4-g128, razer-fp4-g128).
// E2M1 values times 2 are the integers {0,1,2,3,4,6,8,12}, so one pshufb over a 16-entry int8
// table decodes 16 nibbles; the 1/2 is folded into the block scale. RaZeR's special value (code
// 0b1000) times 2 is an integer too (multiples of 0.5 up to 9.5), so each of its four variants is
// one more table, picked per block by the two metadata bits (sign, a/b) of its scale.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <string_view>

#include "formats/scale_codes.h"
#include "kernels/cpu/fused_driver.h"
#include "kernels/cpu/vec_avx2.h"
#include "nibble/half.h"

namespace nibble::cpu {
namespace {

constexpr int8_t kTwiceFP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

inline __m128i table_with(int8_t entry8) {
  alignas(16) int8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = kTwiceFP4[i];
  t[8] = entry8;
  return _mm_load_si128(reinterpret_cast<const __m128i*>(t));
}

// Elements 0..7 and 8..15 of the 16 codes in 8 bytes (element 2j in the low nibble), as floats.
inline void decode16(const uint8_t* q, __m128i lut, __m256& w0, __m256& w1) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  const __m128i idx = _mm_unpacklo_epi8(_mm_and_si128(b, mask), _mm_and_si128(_mm_srli_epi16(b, 4), mask));
  const __m128i v = _mm_shuffle_epi8(lut, idx);
  w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
  w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
}

// The M dots of one row of nb blocks of 16 * G codes; block(b, lut, scale) gives the table and
// the scale (already halved) of block b.
template <int M, class Block>
inline void fp4_row(const uint8_t* q, int64_t nb, int G, const float* x, int64_t ldx, float gs,
                    const Block& block, float* out) {
  __m256 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m128i lut;
    float scale;
    block(b, lut, scale);
    __m256 part[M];
    for (int m = 0; m < M; ++m) part[m] = _mm256_setzero_ps();
    for (int g = 0; g < G; ++g) {
      __m256 w0, w1;
      decode16(q + (b * G + g) * 8, lut, w0, w1);
      const int64_t k = (b * G + g) * 16;
      for (int m = 0; m < M; ++m) {
        part[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * ldx + k), part[m]);
        part[m] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + m * ldx + k + 8), part[m]);
      }
    }
    const __m256 s = _mm256_set1_ps(scale);
    for (int m = 0; m < M; ++m) acc[m] = _mm256_fmadd_ps(part[m], s, acc[m]);
  }
  for (int m = 0; m < M; ++m) out[m] = hsum(acc[m]) * gs;
}

// Runs fp4_row over all rows of w (blocks of w.block = 16 * G codes, scale_bytes bytes of scale
// each); make_block(row's scales) gives the row's block(b, lut, scale).
template <class MakeBlock>
bool run_fp4(const float* x, int64_t M, const PackedTensor& w, float* y, int scale_bytes,
             MakeBlock&& make_block) {
  const int G = w.block / 16;
  const int64_t N = w.rows, K = w.cols, nb = (K + w.block - 1) / w.block, row_q = nb * 8 * G;
  if (w.qweight.size() != size_t(N * row_q) || w.scales.size() != size_t(N * nb * scale_bytes))
    return false;
  with_small_m(M, [&](auto m_const) {
    constexpr int kM = decltype(m_const)::value;
    fused_rows<kM>(x, N, K, nb * 16 * G, [&](int64_t n, const float* xp, int64_t ldx, float* out) {
      fp4_row<kM>(w.qweight.data() + n * row_q, nb, G, xp, ldx, w.global_scale,
                  make_block(w.scales.data() + n * nb * scale_bytes), out);
    }, y);
  });
  return true;
}

// The special-value magnitude as stored (0 means the format's default), if it is valid.
bool razer_sv(float stored, float fallback, float& sv) {
  sv = stored == 0.0f ? fallback : stored;
  return sv >= 2.5f && sv <= 9.5f && std::floor(sv * 2.0f) == sv * 2.0f;
}

// The four RaZeR tables, indexed by (sv sign, a/b select) as two bits; false if a or b is invalid.
bool razer_tables(const PackedTensor& w, __m128i luts[4]) {
  float a, b;
  if (!razer_sv(w.sv_a, 5.0f, a) || !razer_sv(w.sv_b, 8.0f, b)) return false;
  const int8_t ta = int8_t(a * 2.0f), tb = int8_t(b * 2.0f);
  luts[0] = table_with(ta), luts[1] = table_with(tb);
  luts[2] = table_with(int8_t(-ta)), luts[3] = table_with(int8_t(-tb));
  return true;
}

bool group_block(int b) { return b > 0 && b % 32 == 0 && b <= 4096; }

inline uint16_t word_at(const uint8_t* s, int64_t g) {
  uint16_t v;
  std::memcpy(&v, s + 2 * g, 2);
  return v;
}

}  // namespace

bool fused_fp4_linear(const float* x, int64_t M, const PackedTensor& w, float* y) {
  const std::string_view f = w.format;
  const __m128i plain = table_with(0);
  if (f == "nvfp4" || f == "nvfp4-4over6") {
    if (w.block != 16) return false;
    const float* e4m3 = formats::e4m3_table();
    return run_fp4(x, M, w, y, 1, [&](const uint8_t* s) {
      return [=](int64_t b, __m128i& t, float& scale) { t = plain, scale = e4m3[s[b]] * 0.5f; };
    });
  }
  if (f == "mxfp4") {
    if (w.block != 32) return false;
    const float* e8m0 = formats::decode_table<kE8M0>();
    return run_fp4(x, M, w, y, 1, [&](const uint8_t* s) {
      return [=](int64_t b, __m128i& t, float& scale) { t = plain, scale = e8m0[s[b]] * 0.5f; };
    });
  }
  if (f == "fp4-g128") {
    if (!group_block(w.block)) return false;
    return run_fp4(x, M, w, y, 2, [&](const uint8_t* s) {
      return [=](int64_t g, __m128i& t, float& scale) {
        t = plain, scale = half_to_float(word_at(s, g)) * 0.5f;
      };
    });
  }
  __m128i luts[4];
  if (f == "nvfp4-razer") {  // scale byte: bit 7 sv sign, bit 6 a/b, bits 5..0 E3M3
    if (w.block != 16 || !razer_tables(w, luts)) return false;
    const float* e3m3 = formats::e3m3_table();
    return run_fp4(x, M, w, y, 1, [&](const uint8_t* s) {
      return [=, &luts](int64_t blk, __m128i& t, float& scale) {
        t = luts[s[blk] >> 6], scale = e3m3[s[blk] & 0x3F] * 0.5f;
      };
    });
  }
  if (f == "razer-fp4-g128") {  // FP16 scale word: bit 15 sv sign, bit 14 a/b, the rest the scale
    if (!group_block(w.block) || !razer_tables(w, luts)) return false;
    return run_fp4(x, M, w, y, 2, [&](const uint8_t* s) {
      return [=, &luts](int64_t g, __m128i& t, float& scale) {
        const uint16_t word = word_at(s, g);
        t = luts[word >> 14], scale = half_to_float(uint16_t(word & 0x3FFF)) * 0.5f;
      };
    });
  }
  return false;
}

}  // namespace nibble::cpu

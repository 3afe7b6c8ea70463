// Fused decode-dot for NF4: each code indexes the 16 levels, held as two 8-float tables (one
// vpermps each) and blended on the code's bit 3; the FP32 block absmax is applied once per block.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/fused_driver.h"
#include "kernels/cpu/vec_avx2.h"
#include "nibble/nf4.h"

namespace nibble::cpu {
namespace {

struct Levels {
  __m256 lo, hi;  // levels of codes 0..7 and 8..15
};

inline __m256 lookup(const Levels& t, __m128i codes8) {
  const __m256i idx = _mm256_cvtepu8_epi32(codes8);
  const __m256 lo = _mm256_permutevar8x32_ps(t.lo, idx), hi = _mm256_permutevar8x32_ps(t.hi, idx);
  return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));  // bit 3 -> sign
}

// The M dots of one row of nb blocks of `block` codes (block a multiple of 16).
template <int M>
void nf4_row(const uint8_t* q, const uint8_t* scales, int64_t nb, int block, const float* x,
             int64_t ldx, const Levels& t, float* out) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  __m256 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256 part[M];
    for (int m = 0; m < M; ++m) part[m] = _mm256_setzero_ps();
    for (int64_t k = b * block; k < (b + 1) * block; k += 16) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + k / 2));
      const __m128i codes =
          _mm_unpacklo_epi8(_mm_and_si128(bytes, mask), _mm_and_si128(_mm_srli_epi16(bytes, 4), mask));
      const __m256 w0 = lookup(t, codes), w1 = lookup(t, _mm_srli_si128(codes, 8));
      for (int m = 0; m < M; ++m) {
        part[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * ldx + k), part[m]);
        part[m] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + m * ldx + k + 8), part[m]);
      }
    }
    float absmax;
    std::memcpy(&absmax, scales + 4 * b, 4);
    const __m256 s = _mm256_set1_ps(absmax);
    for (int m = 0; m < M; ++m) acc[m] = _mm256_fmadd_ps(part[m], s, acc[m]);
  }
  for (int m = 0; m < M; ++m) out[m] = hsum(acc[m]);
}

}  // namespace

bool fused_nf4_linear(const float* x, int64_t M, const PackedTensor& w, float* y) {
  if (w.format != "nf4") return false;
  const int block = w.block;
  if (block < 32 || block > 4096 || (block & (block - 1)) != 0) return false;
  const int64_t N = w.rows, K = w.cols, nb = (K + block - 1) / block, row_q = nb * block / 2;
  if (w.qweight.size() != size_t(N * row_q) || w.scales.size() != size_t(N * nb * 4)) return false;
  const Levels t{_mm256_loadu_ps(kNF4Levels), _mm256_loadu_ps(kNF4Levels + 8)};
  with_small_m(M, [&](auto m_const) {
    constexpr int kM = decltype(m_const)::value;
    fused_rows<kM>(x, N, K, nb * block, [&](int64_t n, const float* xp, int64_t ldx, float* out) {
      nf4_row<kM>(w.qweight.data() + n * row_q, w.scales.data() + n * nb * 4, nb, block, xp, ldx, t, out);
    }, y);
  });
  return true;
}

}  // namespace nibble::cpu

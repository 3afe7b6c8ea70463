// Fused decode-dot for int4-g128 (asymmetric INT4): per group sum((q - z) * x) * s, with q - z
// formed on 16 bytes at once. Padded codes beyond K decode to -z, but meet zero-padded x.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/fused_driver.h"
#include "kernels/cpu/vec_avx2.h"
#include "nibble/half.h"

namespace nibble::cpu {
namespace {

// The M dots of one row of nb groups of `block` codes (block a multiple of 32).
template <int M>
void int4_row(const uint8_t* q, const uint8_t* scales, const uint8_t* zeros, int64_t nb, int block,
              const float* x, int64_t ldx, float* out) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  __m256 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t g = 0; g < nb; ++g) {
    const __m128i zero = _mm_set1_epi8(char((zeros[g >> 1] >> ((g & 1) * 4)) & 15));
    __m256 part[M];
    for (int m = 0; m < M; ++m) part[m] = _mm256_setzero_ps();
    for (int64_t k = g * block; k < (g + 1) * block; k += 16) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + k / 2));
      const __m128i codes =
          _mm_unpacklo_epi8(_mm_and_si128(bytes, mask), _mm_and_si128(_mm_srli_epi16(bytes, 4), mask));
      const __m128i v = _mm_sub_epi8(codes, zero);  // -15..15
      const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
      const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
      for (int m = 0; m < M; ++m) {
        part[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * ldx + k), part[m]);
        part[m] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + m * ldx + k + 8), part[m]);
      }
    }
    uint16_t h;
    std::memcpy(&h, scales + 2 * g, 2);
    const __m256 s = _mm256_set1_ps(half_to_float(h));
    for (int m = 0; m < M; ++m) acc[m] = _mm256_fmadd_ps(part[m], s, acc[m]);
  }
  for (int m = 0; m < M; ++m) out[m] = hsum(acc[m]);
}

}  // namespace

bool fused_int4_linear(const float* x, int64_t M, const PackedTensor& w, float* y) {
  if (w.format != "int4-g128") return false;
  const int block = w.block;
  if (block <= 0 || block % 32 != 0 || block > 4096) return false;
  const int64_t N = w.rows, K = w.cols, nb = (K + block - 1) / block, row_q = nb * block / 2,
                row_z = (nb + 1) / 2;
  if (w.qweight.size() != size_t(N * row_q) || w.scales.size() != size_t(N * nb * 2) ||
      w.aux.size() != size_t(N * row_z))
    return false;
  with_small_m(M, [&](auto m_const) {
    constexpr int kM = decltype(m_const)::value;
    fused_rows<kM>(x, N, K, nb * block, [&](int64_t n, const float* xp, int64_t ldx, float* out) {
      int4_row<kM>(w.qweight.data() + n * row_q, w.scales.data() + n * nb * 2,
                   w.aux.data() + n * row_z, nb, block, xp, ldx, out);
    }, y);
  });
  return true;
}

}  // namespace nibble::cpu

// Fused decode-dot for the 16-bit formats: bf16 (a float's top half: widen and shift) and fp16
// (F16C vcvtph2ps), 8 weights per step, straight from the packed row.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/fused_driver.h"
#include "kernels/cpu/vec_avx2.h"
#include "nibble/half.h"

namespace nibble::cpu {
namespace {

template <bool kBf16>
inline __m256 load8(const uint8_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  else return _mm256_cvtph_ps(h);
}

template <int M, bool kBf16>
void half_row(const uint8_t* q, int64_t K, const float* x, int64_t ldx, float* out) {
  __m256 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256 w = load8<kBf16>(q + 2 * k);
    for (int m = 0; m < M; ++m) acc[m] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + m * ldx + k), acc[m]);
  }
  for (int m = 0; m < M; ++m) {
    float s = hsum(acc[m]);
    for (int64_t kk = k; kk < K; ++kk) {
      uint16_t h;
      std::memcpy(&h, q + 2 * kk, 2);
      s += (kBf16 ? bf16_to_float(h) : half_to_float(h)) * x[m * ldx + kk];
    }
    out[m] = s;
  }
}

template <bool kBf16>
void run_half(const float* x, int64_t M, const PackedTensor& w, float* y) {
  const int64_t K = w.cols;
  with_small_m(M, [&](auto m_const) {
    constexpr int kM = decltype(m_const)::value;
    fused_rows<kM>(x, w.rows, K, K, [&](int64_t n, const float* xp, int64_t ldx, float* out) {
      half_row<kM, kBf16>(w.qweight.data() + n * K * 2, K, xp, ldx, out);
    }, y);
  });
}

}  // namespace

bool fused_half_linear(const float* x, int64_t M, const PackedTensor& w, float* y) {
  const bool bf16 = w.format == "bf16";
  if (!bf16 && w.format != "fp16") return false;
  if (w.qweight.size() != size_t(w.rows * w.cols * 2)) return false;
  if (bf16) run_half<true>(x, M, w, y);
  else run_half<false>(x, M, w, y);
  return true;
}

}  // namespace nibble::cpu

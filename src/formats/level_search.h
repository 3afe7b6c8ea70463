#pragma once
// The hot loops of the RaZeR family, AVX2: nearest-level assignment of a block (4 lanes of
// float64 at a time, the same exact comparisons as elements.h) and the fixed-order sum that every
// quantization error / least-squares sum uses. Internal to src/formats.
#include <immintrin.h>

#include <cstdint>

#include "formats/elements.h"

namespace nibble::formats {

// Sum of n terms in the one order the quantizers and the reference use: four running sums over
// i mod 4 (each in increasing i), combined as (s0 + s1) + (s2 + s3).
inline double sum4(const double* t, int64_t n) {
  __m256d acc = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) acc = _mm256_add_pd(acc, _mm256_loadu_pd(t + i));
  alignas(32) double s[4];
  _mm256_store_pd(s, acc);
  for (int k = 0; i < n; ++i, ++k) s[k] += t[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// Where the magnitude index steps up (RaZeR rule: a value on a threshold stays with the smaller
// magnitude). The first kLinear thresholds sit at (j + 0.5) / kInvStep, so the count of those
// below a is min(ceil(a * kInvStep - 0.5), kLinear), exactly; the rest are compared one by one.
template <class Grid>
struct Thresholds;
template <>
struct Thresholds<FP4Grid> {
  static constexpr double kInvStep = 2.0;  // thresholds 0.25, 0.75, 1.25, 1.75
  static constexpr int kLinear = 4, kRest = 3;
  static constexpr double kAt[3] = {2.5, 3.5, 5.0};
  static constexpr float kMagnitude[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
};
template <>
struct Thresholds<FP3Grid> {
  static constexpr double kInvStep = 1.0;  // thresholds 0.5, 1.5
  static constexpr int kLinear = 2, kRest = 1;
  static constexpr double kAt[1] = {3.0};
  static constexpr float kMagnitude[8] = {0, 1, 2, 4, 0, 0, 0, 0};
};

// For i < n: r = (x[i] * mul) / div, codes[i] = its nearest code (razer_code<Grid> when
// kSpecial, Grid::regular otherwise) and vals[i] = that code's value. div must be > 0.
template <class Grid, bool kSpecial>
void assign_levels(const float* x, int64_t n, double mul, double div, double sv, uint8_t* codes,
                   double* vals) {
  using T = Thresholds<Grid>;
  const __m256d sign = _mm256_set1_pd(-0.0), zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
  const __m256d vmul = _mm256_set1_pd(mul), vdiv = _mm256_set1_pd(div);
  const __m256d neg_code = _mm256_set1_pd(double(1 << (Grid::kBits - 1)));
  const __m256d vsv = _mm256_set1_pd(sv), abs_sv = _mm256_set1_pd(sv < 0 ? -sv : sv);
  const __m256d special = _mm256_set1_pd(double(Grid::kSpecialCode)), half = _mm256_set1_pd(0.5);
  const __m256d inv_step = _mm256_set1_pd(T::kInvStep), linear = _mm256_set1_pd(T::kLinear);
  const __m256 magnitudes = _mm256_loadu_ps(T::kMagnitude);
  for (int64_t i = 0; i < n; i += 4) {
    float tail[4] = {0, 0, 0, 0};
    const float* src = x + i;
    if (n - i < 4) {
      for (int64_t k = 0; k < n - i; ++k) tail[k] = x[i + k];
      src = tail;
    }
    __m256d r = _mm256_div_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(src)), vmul), vdiv);
    __m256d a = _mm256_andnot_pd(sign, r);
    __m256d idx = _mm256_min_pd(_mm256_ceil_pd(_mm256_sub_pd(_mm256_mul_pd(a, inv_step), half)), linear);
    for (int k = 0; k < T::kRest; ++k) {
      idx = _mm256_add_pd(idx, _mm256_and_pd(_mm256_cmp_pd(a, _mm256_set1_pd(T::kAt[k]), _CMP_GT_OQ), one));
    }
    __m256 mag8 = _mm256_permutevar8x32_ps(magnitudes, _mm256_castsi128_si256(_mm256_cvtpd_epi32(idx)));
    __m256d mag = _mm256_cvtps_pd(_mm256_castps256_ps128(mag8));
    __m256d neg = _mm256_and_pd(_mm256_cmp_pd(r, zero, _CMP_LT_OQ), _mm256_cmp_pd(idx, zero, _CMP_GT_OQ));
    __m256d v = _mm256_or_pd(mag, _mm256_and_pd(neg, sign));
    __m256d code = _mm256_add_pd(idx, _mm256_and_pd(neg, neg_code));
    if constexpr (kSpecial) {  // prefer_special of elements.h, lane-wise
      __m256d mid = _mm256_mul_pd(_mm256_add_pd(v, vsv), half);
      __m256d closer = _mm256_blendv_pd(_mm256_cmp_pd(r, mid, _CMP_LT_OQ), _mm256_cmp_pd(r, mid, _CMP_GT_OQ),
                                        _mm256_cmp_pd(vsv, v, _CMP_GT_OQ));
      __m256d smaller = _mm256_cmp_pd(abs_sv, _mm256_andnot_pd(sign, v), _CMP_LT_OQ);
      __m256d pick = _mm256_blendv_pd(closer, smaller, _mm256_cmp_pd(r, mid, _CMP_EQ_OQ));
      pick = _mm256_blendv_pd(pick, _mm256_cmp_pd(v, zero, _CMP_LT_OQ), _mm256_cmp_pd(vsv, v, _CMP_EQ_OQ));
      v = _mm256_blendv_pd(v, vsv, pick);
      code = _mm256_blendv_pd(code, special, pick);
    }
    __m128i c32 = _mm256_cvtpd_epi32(code);
    uint32_t c8 = uint32_t(_mm_cvtsi128_si32(_mm_packus_epi16(_mm_packus_epi32(c32, c32), _mm_setzero_si128())));
    if (n - i >= 4) {
      _mm256_storeu_pd(vals + i, v);
      __builtin_memcpy(codes + i, &c8, 4);
    } else {
      alignas(32) double vv[4];
      _mm256_store_pd(vv, v);
      for (int64_t k = 0; k < n - i; ++k) vals[i + k] = vv[k], codes[i + k] = uint8_t(c8 >> (8 * k));
    }
  }
}

}  // namespace nibble::formats

#pragma once
// The loop shared by the fused kernels: zero-pads X to whole blocks (the packed rows hold zero
// codes there, so the padding contributes nothing) and runs one dot kernel per weight row, over
// rows in parallel when the matrix is large enough to pay for the threads.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "nibble/format.h"

namespace nibble::cpu {

// row_dot(n, xp, ldx, out) writes the M dot products of weight row n into out[0..M).
template <int M, class RowDot>
void fused_rows(const float* x, int64_t N, int64_t K, int64_t padded_k, RowDot&& row_dot, float* y) {
  constexpr int64_t kParallelWork = 1 << 20;  // as linear_cpu: below this, threads cost more
  std::vector<float> pad;
  const float* xp = x;
  if (padded_k != K) {
    pad.assign(size_t(M * padded_k), 0.0f);
    for (int m = 0; m < M; ++m) std::memcpy(pad.data() + m * padded_k, x + m * K, size_t(K) * sizeof(float));
    xp = pad.data();
  }
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
  for (int64_t n = 0; n < N; ++n) {
    float out[M];
    row_dot(n, xp, padded_k, out);
    for (int m = 0; m < M; ++m) y[m * N + n] = out[m];
  }
}

// Calls f(std::integral_constant<int, M>) for M in 1..4 (the caller checked the range).
template <class F>
void with_small_m(int64_t M, F&& f) {
  switch (M) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    default: f(std::integral_constant<int, 4>{}); break;
  }
}

// Per-family entry points (fused_fp4.cpp, fused_nf4.cpp, fused_int4.cpp, fused_half.cpp); same
// contract as fused_linear_cpu.
bool fused_fp4_linear(const float* x, int64_t M, const PackedTensor& w, float* y);
bool fused_nf4_linear(const float* x, int64_t M, const PackedTensor& w, float* y);
bool fused_int4_linear(const float* x, int64_t M, const PackedTensor& w, float* y);
bool fused_half_linear(const float* x, int64_t M, const PackedTensor& w, float* y);

}  // namespace nibble::cpu

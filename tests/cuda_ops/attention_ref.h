#pragma once
// float64 causal attention of one query head over one KV head of an FP16 cache, for the GPU tests.
#include <cmath>
#include <cstdint>
#include <vector>

#include "nibble/half.h"

namespace nibble::cuda::test {

// q: d fp16 values; kh, vh: the head's cache rows [max_ctx][d]; attends to positions 0..last.
inline std::vector<double> ref_attention(const uint16_t* q, const uint16_t* kh, const uint16_t* vh, int last,
                                         int d) {
  std::vector<double> s(size_t(last) + 1), out(size_t(d), 0.0);
  double mx = -INFINITY;
  for (int j = 0; j <= last; ++j) {
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += double(half_to_float(q[i])) * half_to_float(kh[size_t(j) * d + i]);
    s[size_t(j)] = dot / std::sqrt(double(d));
    mx = std::max(mx, s[size_t(j)]);
  }
  double sum = 0;
  for (double& x : s) sum += (x = std::exp(x - mx));
  for (int j = 0; j <= last; ++j)
    for (int i = 0; i < d; ++i) out[size_t(i)] += s[size_t(j)] / sum * half_to_float(vh[size_t(j) * d + i]);
  return out;
}

}  // namespace nibble::cuda::test

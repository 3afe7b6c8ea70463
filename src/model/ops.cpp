#include "model/ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/cpu/vec_avx2.h"
#include "nibble/error.h"

namespace nibble::ops {

void rmsnorm(const float* x, const float* w, int64_t T, int64_t n, double eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(xr[i]) * xr[i];
    const float r = float(1.0 / std::sqrt(ss / double(n) + eps));
    float* yr = y + t * n;
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * r);
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

std::vector<double> rope_inv_freq(const ModelConfig& cfg) {
  const int d = cfg.head_dim;
  std::vector<double> inv(size_t(d / 2));
  for (int i = 0; i < d / 2; ++i) inv[size_t(i)] = 1.0 / std::pow(cfg.rope_theta, 2.0 * i / d);
  const RopeScaling& rs = cfg.rope_scaling;
  if (rs.type.empty() || rs.type == "default") return inv;
  if (rs.type != "llama3")
    throw Error("config.json: rope_scaling type \"" + rs.type +
                "\" is not supported (default, llama3)");
  // Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, the band between blended.
  const double old_len = rs.original_max_positions;
  const double low_wavelen = old_len / rs.low_freq_factor;
  const double high_wavelen = old_len / rs.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f /= rs.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (old_len / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
      f = (1 - smooth) * f / rs.factor + smooth * f;
    }
  }
  return inv;
}

void apply_rope(float* x, int64_t T, int heads, int d, int pos0, const float* cos_sin) {
  const int half = d / 2;
  for (int64_t t = 0; t < T; ++t) {
    const float* cs = cos_sin + int64_t(pos0 + t) * d;
    for (int h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * d;
      for (int i = 0; i < half; ++i) {  // HF convention: element i pairs with i + d/2
        const float a = v[i], b = v[i + half], c = cs[i], s = cs[half + i];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void attention(const float* q, int64_t T, int pos0, const float* kc, const float* vc,
               int max_ctx, int nh, int nkv, int d, float* out) {
  const int group = nh / nkv;
  const float scale = 1.0f / std::sqrt(float(d));
  const int64_t width = int64_t(nh) * d;
  const int64_t work = T * nh * (pos0 + T) * d;  // about the multiply-adds of the scores
#pragma omp parallel if (work >= (1 << 20))
  {
    std::vector<float> p(size_t(pos0 + T));
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int64_t t = 0; t < T; ++t) {
      for (int h = 0; h < nh; ++h) {
        const int n = pos0 + int(t) + 1;  // causal: positions 0..pos0+t
        const float* qv = q + t * width + int64_t(h) * d;
        const float* kh = kc + int64_t(h / group) * max_ctx * d;
        const float* vh = vc + int64_t(h / group) * max_ctx * d;
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
          p[size_t(j)] = cpu::dot(qv, kh + int64_t(j) * d, d) * scale;
          mx = std::max(mx, p[size_t(j)]);
        }
        double sum = 0;
        for (int j = 0; j < n; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
        const float inv = float(1.0 / sum);
        float* o = out + t * width + int64_t(h) * d;
        for (int i = 0; i < d; ++i) o[i] = 0;
        for (int j = 0; j < n; ++j) cpu::axpy(p[size_t(j)] * inv, vh + int64_t(j) * d, o, d);
      }
    }
  }
}

}  // namespace nibble::ops

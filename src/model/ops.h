#pragma once
// The non-linear pieces of a Llama block, on FP32 row-major activations.
#include <cstdint>
#include <vector>

#include "nibble/model_config.h"

namespace nibble::ops {

// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w, for T rows of n (y may alias x).
void rmsnorm(const float* x, const float* w, int64_t T, int64_t n, double eps, float* y);

// gate[i] = silu(gate[i]) * up[i]
void silu_mul(float* gate, const float* up, int64_t n);

// Inverse frequencies of RoPE for head_dim (head_dim / 2 of them), with the config's scaling
// ("default", "llama3"); unknown scaling types throw nibble::Error.
std::vector<double> rope_inv_freq(const ModelConfig& cfg);

// Rotates, in place, `heads` heads of dim d at each of T rows (row stride heads*d), row t being
// at position pos0 + t. cos_sin holds, per position, d/2 cosines then d/2 sines.
void apply_rope(float* x, int64_t T, int heads, int d, int pos0, const float* cos_sin);

// Causal GQA attention for T new queries at positions pos0..pos0+T-1 over a cache holding
// positions 0..pos0+T-1. q: [T, nh*d]; kc, vc: [nkv][max_ctx][d]; out: [T, nh*d].
void attention(const float* q, int64_t T, int pos0, const float* kc, const float* vc,
               int max_ctx, int nh, int nkv, int d, float* out);

}  // namespace nibble::ops

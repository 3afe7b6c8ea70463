#pragma once
// A Session's private state: the FP32 KV cache (holding the values of a KV-cache format when the
// model has one), RoPE table and scratch activations.
#include <vector>

namespace nibble {

struct SessionState {
  int max_ctx = 0, pos = 0;
  std::vector<float> rope_cos_sin;  // [max_ctx][head_dim]: head_dim/2 cosines then sines
  std::vector<std::vector<float>> k_cache, v_cache;  // per layer: [nkv][max_ctx][head_dim]
  // scratch, resized per forward
  std::vector<float> x, xn, xq, q, k, v, att, gate, up, tmp;
};

}  // namespace nibble

#pragma once
// Fused decode-dot kernels for small M (decode): the packed weight codes are decoded in registers
// and multiplied straight into the activations, never materializing a float row. Per block the
// kernel accumulates sum(code_value * x) and applies the block scale once; the global scale is
// applied once per dot.
#include <cstdint>

#include "nibble/format.h"

namespace nibble::cpu {

inline constexpr int64_t kFusedMaxM = 4;  // activation rows that share each decoded vector

// Y[M, N] = X[M, K] · W^T like linear_cpu. Returns false (computing nothing) when no fused kernel
// covers w.format, M is outside 1..kFusedMaxM, or w's planes do not have the expected sizes (the
// generic path then reports the malformed tensor).
bool fused_linear_cpu(const float* x, int64_t M, const PackedTensor& w, float* y);

}  // namespace nibble::cpu

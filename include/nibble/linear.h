#pragma once
// CPU linear layer over weights in any registered format, decoded on the fly (a few rows at a time
// into a thread-local buffer; never a float copy of the whole matrix).
#include <cstdint>
#include <string_view>

#include "nibble/format.h"

namespace nibble {

// Y[M, N] = X[M, K] · W[N, K]^T with K = w.cols, N = w.rows; x and y are row-major and dense.
// Each decoded weight row is reused for all M activation rows (batched prefill).
void linear_cpu(const float* x, int64_t M, const PackedTensor& w, float* y);

// Quantizes then dequantizes each of the M rows of x [M, K] in place with an activation format
// (per-token online quantization; see FormatInfo::for_activations) or a KV-cache format. block:
// the format's block size (0: its default); `what` names the rows in errors (NaN/Inf input).
void fake_quantize_rows(const FormatInfo& fmt, float* x, int64_t M, int64_t K, int block = 0,
                        std::string_view what = "activation row");

}  // namespace nibble

#pragma once
// Turning stored tensors into the model's weights: shape checks naming the tensor, FP32 vectors
// for norms / biases, and PackedTensors kept as stored or quantized on load.
#include <string>
#include <vector>

#include "model/weights.h"
#include "nibble/safetensors.h"

namespace nibble {

// Throws nibble::Error naming the tensor and file when t's shape is not `want`.
void check_shape(const TensorView& t, const std::vector<int64_t>& want);

// A 1-D FP32 vector (norm weight, bias) of length n.
std::vector<float> load_vector(const TensorView& t, int64_t n);

// The registry format that holds t's dtype exactly: F32 -> fp32, BF16 -> bf16, F16 -> fp16.
const char* stored_format(const TensorView& t);

// NestedFP can hold the matrix: every element, as FP16, has |w| < 1.875 (FORMATS.md "NestedFP").
bool nestedfp_eligible(const std::vector<float>& data);

// Builds a PackedTensor of `format` from FP32 data; with `measure`, adds the quantization error
// to w.sq_err / w.sq_ref.
PackedTensor pack_matrix(const float* data, int64_t rows, int64_t cols, const std::string& format,
                         const QuantOptions& quant, const std::string& name, bool measure,
                         ModelWeights& w);

}  // namespace nibble

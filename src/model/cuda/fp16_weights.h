#pragma once
// Weights the kernels cannot read packed, decoded on the host to FP16 for cuBLAS / lookups.
#include <cstdint>
#include <string_view>
#include <vector>

#include "nibble/format.h"

namespace nibble::cuda {

// t dequantized to FP16 [rows, cols] (bits), a block of rows at a time. Throws nibble::Error
// naming `name` when a value does not fit in FP16 (|w| > 65504) or is not finite.
std::vector<uint16_t> dequantize_fp16(const PackedTensor& t, std::string_view name);

// A plain float weight (bf16, fp32) as an "fp16" PackedTensor, the FP16 GEMV's format (same
// errors as dequantize_fp16).
PackedTensor as_fp16(const PackedTensor& t, std::string_view name);

}  // namespace nibble::cuda

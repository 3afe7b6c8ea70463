#pragma once
// NF4 (QLoRA / bitsandbytes): a 16-level lookup type, and the import of bitsandbytes-packed data.
#include <cstdint>

#include "nibble/format.h"

namespace nibble {

// The 16 NF4 levels, codes 0..15 (exact float32 values of ../shared/FORMATS.md).
inline constexpr float kNF4Levels[16] = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f};

// Nearest level to v (ties to the lower code). v is normally in [-1, 1]; outside it clamps.
// Throws nibble::Error on NaN / Inf.
uint32_t nf4_encode(double v);

// bitsandbytes packs element 2j in the HIGH nibble; nibble's layout puts it in the low nibble.
// packed: rows * cols / 2 bytes (flat, as bitsandbytes stores it); absmax: one FP32 per block.
// cols must be a multiple of block (so bitsandbytes' flat blocks are nibble's per-row blocks);
// block a power of two in 32..4096. Returns an "nf4" PackedTensor. `name` is used in errors.
PackedTensor nf4_from_bitsandbytes(const uint8_t* packed, const float* absmax, int64_t rows,
                                   int64_t cols, int block, std::string_view name = "tensor");

}  // namespace nibble

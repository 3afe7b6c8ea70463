#pragma once
// The 16 NF4 levels (nibble::kNF4Levels, FORMATS.md) copied into device constant memory.
#include "nibble/nf4.h"

namespace nibble::cuda::detail {

__device__ __constant__ static const float kNf4Levels[16] = {
    kNF4Levels[0], kNF4Levels[1], kNF4Levels[2],  kNF4Levels[3],  kNF4Levels[4],  kNF4Levels[5],
    kNF4Levels[6], kNF4Levels[7], kNF4Levels[8],  kNF4Levels[9],  kNF4Levels[10], kNF4Levels[11],
    kNF4Levels[12], kNF4Levels[13], kNF4Levels[14], kNF4Levels[15]};

}  // namespace nibble::cuda::detail

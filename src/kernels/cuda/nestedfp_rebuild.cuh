#pragma once
// NestedFP16's exact rebuild on the GPU, shared by the mma.sync and wgmma GEMMs.
#include <cstdint>

namespace nibble::cuda {

// Four weights from upper bytes u and lower bytes l -> two fp16 pairs. Per byte (FORMATS.md):
// hi6 = ((U - (L >> 7)) >> 1) & 0x3F, w = ((U & 0x80) | hi6) << 8 | L. Setting bit 7 of every byte
// before the subtraction keeps borrows inside the byte; bits 6..1 are unaffected.
__device__ __forceinline__ void nestedfp_rebuild(uint32_t u, uint32_t l, uint32_t& h01, uint32_t& h23) {
  const uint32_t hi6 = (((u | 0x80808080u) - ((l >> 7) & 0x01010101u)) >> 1) & 0x3F3F3F3Fu;
  const uint32_t top = (u & 0x80808080u) | hi6;
  h01 = __byte_perm(l, top, 0x5140);
  h23 = __byte_perm(l, top, 0x7362);
}

}  // namespace nibble::cuda

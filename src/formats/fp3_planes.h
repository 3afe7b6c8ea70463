#pragma once
// Serialized FP3 codes: per 32 elements, three little-endian 32-bit bit-planes (12 bytes):
// plane k holds bit k of each code (element i at bit i), planes in order bit 0, bit 1, bit 2
// (bit 2 is the sign; code 0b100 is the RaZeR special value). Internal to src/formats.
#include <cstdint>
#include <cstring>

namespace nibble::formats {

inline constexpr int kFP3ChunkElems = 32, kFP3ChunkBytes = 12;

// codes: 32 values in 0..7 -> 12 bytes.
inline void fp3_pack_chunk(const uint8_t* codes, uint8_t* out) {
  uint32_t planes[3] = {0, 0, 0};
  for (int i = 0; i < kFP3ChunkElems; ++i) {
    for (int k = 0; k < 3; ++k) planes[k] |= uint32_t((codes[i] >> k) & 1u) << i;
  }
  std::memcpy(out, planes, sizeof planes);  // little-endian host
}

inline void fp3_unpack_chunk(const uint8_t* in, uint8_t* codes) {
  uint32_t planes[3];
  std::memcpy(planes, in, sizeof planes);
  for (int i = 0; i < kFP3ChunkElems; ++i) {
    codes[i] = uint8_t(((planes[0] >> i) & 1u) | (((planes[1] >> i) & 1u) << 1) |
                       (((planes[2] >> i) & 1u) << 2));
  }
}

}  // namespace nibble::formats

#pragma once
// Offline repacking from the serialized layouts of ../shared/FORMATS.md into the kernels' private
// layouts (host code; documented next to each kernel and in docs/kernels.md).
#include <cstdint>
#include <vector>

namespace nibble::cuda::detail {

// FP4 codes S EEM (two per byte) -> paper 001's {E1 E0 M S} nibbles: 0.5 -> 0000, +0 -> 0010,
// -0 -> 0011 (the special value) for RaZeR or 0010 (+0) for plain FP4, else EEM << 1 | S.
std::vector<uint8_t> repack_fp4_ems(const std::vector<uint8_t>& q, bool razer);

// Serialized FP3 (per 32 elements three little-endian planes: bit 0, bit 1, bit 2 = sign; element
// i at bit i) -> per group of 128: the 4 sign planes, the 4 bit-0 planes, the 4 bit-1 planes, each
// plane word in the pair order of gemv_fp3_g128.cu. q holds whole groups of 128.
std::vector<uint8_t> repack_fp3_planes(const std::vector<uint8_t>& q);
// Bit of element e (0..31) inside a kernel-layout plane word.
int fp3_plane_bit(int e);

// Row-major 4-bit codes [N][K/2 bytes] -> the tensor-core tile layout of gemv_mma.cuh:
// [ceil(N/16)][K/64][32 lanes][4 words]; rows past N are zero codes. K must be a multiple of 64.
// scales16 (NVFP4 formats: one byte per 16 elements, row-major [N][K/16]): each chunk's 512 code
// bytes are followed by the block's 16 rows x 4 scale bytes of that chunk (kMmaScaledChunkBytes a
// chunk), so a block is one contiguous stream of codes and scales.
constexpr int64_t kMmaScaledChunkBytes = 512 + 64;
std::vector<uint8_t> repack_mma_tiles(const std::vector<uint8_t>& q, int64_t N, int64_t K,
                                      const std::vector<uint8_t>* scales16 = nullptr);

// int4-g128: FP16 scales [N][G] and 4-bit zero points [N][ceil(G/2)] -> one 32-bit word per group,
// fp16 scale in the low half and fp16 (1024 + z) in the high half.
std::vector<uint8_t> repack_int4_meta(const std::vector<uint8_t>& scales, const std::vector<uint8_t>& zeros,
                                      int64_t rows, int64_t groups);

}  // namespace nibble::cuda::detail

#pragma once
// Offline repacking from the serialized layouts of ../shared/FORMATS.md into the kernels' private
// layouts (host code; documented next to each kernel and in docs/kernels.md).
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace nibble::cuda::detail {

// Serialized FP3 (per 32 elements three little-endian planes: bit 0, bit 1, bit 2 = sign; element
// i at bit i) -> per group of 128: the 4 sign planes, the 4 bit-0 planes, the 4 bit-1 planes, each
// plane word in the pair order of gemv_fp3_g128.cu. q holds whole groups of 128.
std::vector<uint8_t> repack_fp3_planes(const std::vector<uint8_t>& q);
// Bit of element e (0..31) inside a kernel-layout plane word.
int fp3_plane_bit(int e);

// The first k offset (of four consecutive) that tile j of lane t holds in its chunk of the tile
// layout: 32 (j / 2) + 8 t + 4 (j % 2), so a lane's B fragments of tiles 2h and 2h + 1 are one
// 16-byte load of X and a warp's load covers 64 contiguous bytes of each of its 8 token rows.
constexpr int mma_tile_k(int j, int t) { return 32 * (j >> 1) + 8 * t + 4 * (j & 1); }

// Row-major 4-bit codes [N][K/2 bytes] -> the tensor-core tile layout of gemv_mma.cuh:
// [ceil(N/16)][K/64][32 lanes][4 words]; rows past N are zero codes. K must be a multiple of 64.
// chunk_scales (the policies that scale in fp16, kScaledH): row-major [N][K/64 * scale_bytes], each
// row's scale_bytes per 64-element chunk; every chunk's 512 code bytes are then followed by the
// block's 16 rows x scale_bytes of that chunk (mma_chunk_bytes), so a block is one contiguous
// stream of codes and scales. NVFP4 formats: their own 4 scale bytes; MXFP4: mxfp4_tile_exponents.
constexpr int64_t mma_chunk_bytes(int scale_bytes) { return 512 + 16 * int64_t(scale_bytes); }
constexpr int64_t kMmaScaledChunkBytes = mma_chunk_bytes(4);  // NVFP4 formats
std::vector<uint8_t> repack_mma_tiles(const std::vector<uint8_t>& q, int64_t N, int64_t K,
                                      const std::vector<uint8_t>* chunk_scales = nullptr, int scale_bytes = 0);

// Row-major per-group metadata [N][groups] (elements of meta.size() / (N * groups) bytes) ->
// block-major [ceil(N / 16)][groups][16 rows] (rows past N zero): the tile kernels of the
// FP32-scaled formats read the elements of 8 consecutive rows of one group, one sector instead of
// 8, and the streaming kernel copies a row block's groups of a K range as one span.
std::vector<uint8_t> repack_block_major(const std::vector<uint8_t>& meta, int64_t N, int64_t groups);

// NF4's tile layout (gemv_nf4.cu): in every 32-bit code word of repack_mma_tiles' output, the
// codes of decode pair p (nibbles p and p + 4) move to nibbles 2p and 2p + 1. In place.
void repack_nf4_pairs(std::vector<uint8_t>& tiles);

// MXFP4's E8M0 exponents over the blocks of 32 that hold a nonzero code: lowest and highest
// (lo > hi when every block is zero). Throws nibble::Error naming the tensor on a NaN exponent (255)
// in such a block. blocks: N * K / 32.
struct ExponentRange {
  int lo = 256, hi = -1;
};
ExponentRange mxfp4_exponent_range(const std::vector<uint8_t>& q, const std::vector<uint8_t>& scales, int64_t blocks,
                                   std::string_view name);

// MXFP4 scales for the tensor-core GEMV, which scales the decoded fp16 weights (value * 2^-14) in
// fp16 like NVFP4: per block, the fp16 exponent field f = e - hi + 30 of S = 2^(e - hi + 15), so
// that value * 2^-14 * S is exact in fp16 (>= 2^-24, <= 12) while the nonzero blocks span at most
// kMxfp4TileSpan octaves; 0 (S = 0) for blocks outside [hi - kMxfp4TileSpan, hi], which are all
// zero (zero blocks inside keep their S: zero codes times S are zero). The true weights are the kernel's times
// 2^(hi - 128) = kFp4BitsFactor * mxfp4_tile_factor(hi). Row-major [N][K/32], i.e. two bytes per row
// and 64-element chunk. No value when the span is wider (the tensor then has no tile layout).
constexpr int kMxfp4TileSpan = 24;
std::optional<std::vector<uint8_t>> mxfp4_tile_exponents(const std::vector<uint8_t>& q,
                                                         const std::vector<uint8_t>& scales, int64_t N, int64_t K,
                                                         std::string_view name, int* hi);
inline float mxfp4_tile_factor(int hi) { return std::ldexp(1.0f, hi - 142); }

// int4-g128: FP16 scales [N][G] and 4-bit zero points [N][ceil(G/2)] -> one 32-bit word per group,
// fp16 scale in the low half and fp16 (1024 + z) in the high half.
std::vector<uint8_t> repack_int4_meta(const std::vector<uint8_t>& scales, const std::vector<uint8_t>& zeros,
                                      int64_t rows, int64_t groups);

}  // namespace nibble::cuda::detail

#include "repack.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "nibble/error.h"
#include "nibble/half.h"

namespace nibble::cuda::detail {

int fp3_plane_bit(int e) {
  const int g = e / 8, i = e % 8;
  return i < 4 ? 4 * g + i : 16 + 4 * g + (i - 4);
}

std::vector<uint8_t> repack_fp3_planes(const std::vector<uint8_t>& q) {
  constexpr size_t kGroupBytes = 48;  // 128 elements x 3 bits
  std::vector<uint8_t> out(q.size());
  int dst_bit[32];
  for (int e = 0; e < 32; ++e) dst_bit[e] = fp3_plane_bit(e);
  for (size_t g0 = 0; g0 + kGroupBytes <= q.size(); g0 += kGroupBytes) {
    uint32_t planes[3][4] = {};  // [sign, bit0, bit1][sub-block]
    for (int sb = 0; sb < 4; ++sb) {
      uint32_t src[3];
      std::memcpy(src, q.data() + g0 + 12 * sb, 12);
      const int dst_plane[3] = {1, 2, 0};  // serialized bit 0, bit 1, bit 2 (sign)
      for (int k = 0; k < 3; ++k)
        for (int e = 0; e < 32; ++e) planes[dst_plane[k]][sb] |= ((src[k] >> e) & 1u) << dst_bit[e];
    }
    std::memcpy(out.data() + g0, planes, kGroupBytes);
  }
  return out;
}

std::vector<uint8_t> repack_mma_tiles(const std::vector<uint8_t>& q, int64_t N, int64_t K,
                                      const std::vector<uint8_t>* chunk_scales, int scale_bytes) {
  const int64_t blocks = (N + 15) / 16, chunks = K / 64, row_bytes = K / 2;
  if (!chunk_scales) scale_bytes = 0;
  const int64_t chunk_bytes = mma_chunk_bytes(scale_bytes);
  std::vector<uint8_t> out(size_t(blocks * chunks * chunk_bytes), 0);
  auto code = [&](int64_t row, int64_t k) -> uint32_t {
    if (row >= N) return 0;
    return (q[size_t(row * row_bytes + k / 2)] >> (4 * (k & 1))) & 15u;
  };
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t c = 0; c < chunks; ++c)
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int j = 0; j < 4; ++j) {
          uint32_t word = 0;
          for (int p = 0; p < 8; ++p) {
            const int64_t row = b * 16 + g + 8 * (p & 1);
            const int64_t k = c * 64 + mma_tile_k(j, t) + 2 * ((p >> 1) & 1) + (p >> 2);
            word |= code(row, k) << (4 * p);
          }
          std::memcpy(out.data() + size_t((b * chunks + c) * chunk_bytes + lane * 16 + 4 * j), &word, 4);
        }
      }
  if (scale_bytes > 0)  // each chunk's scale bytes of the block's rows after its codes (rows past N: 0)
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t r = 0; r < 16 && b * 16 + r < N; ++r)
          std::memcpy(out.data() + size_t((b * chunks + c) * chunk_bytes + 512 + scale_bytes * r),
                      chunk_scales->data() + size_t((b * 16 + r) * chunks * scale_bytes + scale_bytes * c),
                      size_t(scale_bytes));
  return out;
}

std::vector<uint8_t> repack_block_major(const std::vector<uint8_t>& meta, int64_t N, int64_t groups) {
  const size_t elem = meta.size() / size_t(N * groups);
  std::vector<uint8_t> out(size_t((N + 15) / 16 * 16 * groups) * elem, 0);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t gi = 0; gi < groups; ++gi)
      std::memcpy(out.data() + size_t((r / 16 * groups + gi) * 16 + r % 16) * elem,
                  meta.data() + size_t(r * groups + gi) * elem, elem);
  return out;
}

void repack_nf4_pairs(std::vector<uint8_t>& tiles) {
  for (size_t i = 0; i + 4 <= tiles.size(); i += 4) {
    uint32_t w, out = 0;
    std::memcpy(&w, tiles.data() + i, 4);
    for (int p = 0; p < 4; ++p) out |= ((w >> (4 * p)) & 15u) << (8 * p) | ((w >> (4 * p + 16)) & 15u) << (8 * p + 4);
    std::memcpy(tiles.data() + i, &out, 4);
  }
}

namespace {
// Whether MXFP4 block i (16 code bytes) holds a nonzero code (+-0 are codes 0000 and 1000).
bool mxfp4_block_nonzero(const std::vector<uint8_t>& q, int64_t i) {
  for (int b = 0; b < 16; ++b)
    if (q[size_t(i * 16 + b)] & 0x77) return true;
  return false;
}
}  // namespace

ExponentRange mxfp4_exponent_range(const std::vector<uint8_t>& q, const std::vector<uint8_t>& scales, int64_t blocks,
                                   std::string_view name) {
  ExponentRange r;
  for (int64_t i = 0; i < blocks; ++i) {
    if (!mxfp4_block_nonzero(q, i)) continue;
    const int e = scales[size_t(i)];
    if (e == 255) throw Error(fmt::format("{}: NaN E8M0 scale in block {}", name, i));
    r.lo = std::min(r.lo, e), r.hi = std::max(r.hi, e);
  }
  return r;
}

std::optional<std::vector<uint8_t>> mxfp4_tile_exponents(const std::vector<uint8_t>& q,
                                                         const std::vector<uint8_t>& scales, int64_t N, int64_t K,
                                                         std::string_view name, int* hi) {
  const int64_t blocks = N * (K / 32);
  const ExponentRange r = mxfp4_exponent_range(q, scales, blocks, name);
  if (r.hi - r.lo > kMxfp4TileSpan) return std::nullopt;
  *hi = std::max(r.hi, 0);
  // Every nonzero block's exponent lies in [hi - span, hi], so a block outside it is all zero (its
  // S may as well be 0), and one inside may keep its S whether zero or not: no second scan.
  std::vector<uint8_t> f(size_t(blocks), 0);
  for (int64_t i = 0; i < blocks; ++i) {
    const int e = scales[size_t(i)];
    if (e >= r.hi - kMxfp4TileSpan && e <= r.hi) f[size_t(i)] = uint8_t(e - r.hi + 30);
  }
  return f;
}

std::vector<uint8_t> repack_int4_meta(const std::vector<uint8_t>& scales, const std::vector<uint8_t>& zeros,
                                      int64_t rows, int64_t groups) {
  std::vector<uint8_t> out(size_t(rows * groups * 4));
  const int64_t zrow = (groups + 1) / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      uint16_t s;
      std::memcpy(&s, scales.data() + 2 * (r * groups + g), 2);
      const uint32_t z = (zeros[size_t(r * zrow + g / 2)] >> (4 * (g & 1))) & 15u;
      const uint32_t word = uint32_t(s) | (uint32_t(float_to_half(1024.0f + float(z))) << 16);
      std::memcpy(out.data() + 4 * (r * groups + g), &word, 4);
    }
  return out;
}

}  // namespace nibble::cuda::detail

// NF4 (blocksize 64) fused GEMV: codes as serialized, FP32 absmax per block; on CUDA cores the 16
// levels live in a shared-memory table (16 words in 16 banks: a warp's lookups never conflict), on
// tensor cores in registers (byte permutes, decode_h). No FP16 weight is ever written out.
#include "gemv.cuh"
#include "gemv_mma.cuh"
#include "gemv_stream.cuh"
#include "nf4_levels.cuh"

namespace nibble::cuda::detail {

struct Nf4 {
  static constexpr int kChunkK = 32, kChunkBytes = 16, kGroupK = 64, kLutSize = 16;
  static constexpr float kOutFactor = 1.0f;
  static __device__ __forceinline__ size_t q_row_bytes(int K) { return size_t(K) / 2; }
  static __device__ __forceinline__ size_t s_row_bytes(int K) { return size_t(K) / 64 * 4; }
  struct Meta {
    float absmax;
  };
  static constexpr int kMetaBytes = 4;  // one group's metadata element (the tile kernels' copies)
  static __device__ __forceinline__ Meta meta_of(uint32_t raw, const GemvArgs&) { return {__uint_as_float(raw)}; }
  static __device__ __forceinline__ Meta load_meta(const uint8_t* srow, const GemvArgs& a, int c) {
    return meta_of(__ldg(reinterpret_cast<const unsigned int*>(srow) + c / 2), a);
  }
  static __device__ __forceinline__ float scale(const Meta& m, int, const GemvArgs&) { return m.absmax; }
  static __device__ __forceinline__ void decode8(const uint4 (&w)[1], int e, const Meta&, const GemvArgs&,
                                                 const float* lut, float2 (&d)[4]) {
    const uint32_t x = word_of(w, e);
#pragma unroll
    for (int p = 0; p < 4; ++p) d[p] = make_float2(lut[(x >> (4 * p)) & 15u], lut[(x >> (4 * p + 16)) & 15u]);
  }
  static __device__ float lut_entry(const GemvArgs&, int i) { return kNf4Levels[i]; }
  // Tensor-core path: the levels rounded to fp16 (as bitsandbytes' fp16 dequantization does),
  // looked up in registers by byte permutes (a.nf4_h) instead of a shared-memory table: the tile
  // layout puts pair p's two codes in nibbles 2p, 2p + 1 (repack_nf4_pairs), so four codes select
  // four low and four high level bytes at once (codes 0-7 and 8-15 from two tables, merged by
  // each code's bit 3), and two permutes interleave them into two fp16 pairs. 21 operations per
  // eight weights against two table loads and ~7 operations per pair.
  static constexpr bool kScaledH = false;  // scaled in FP32 once per group
  static constexpr bool kMmaTwoChunks = true;  // gemv_mma.cuh's mma_two_chunks
  static __device__ __forceinline__ void decode_h(uint32_t x, const Meta&, const Meta&, const GemvArgs& a,
                                                  uint32_t (&A)[4]) {
    const uint32_t sel = x & 0x77777777u, x4 = x << 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // codes 4h .. 4h + 3
      const uint32_t s = h ? sel >> 16 : sel;
      const uint32_t m = code_bit3_bytes(x, x4, h);
      const uint32_t lo = (prmt2(a.nf4_h[0], a.nf4_h[1], s) & ~m) | (prmt2(a.nf4_h[2], a.nf4_h[3], s) & m);
      const uint32_t hi = (prmt2(a.nf4_h[4], a.nf4_h[5], s) & ~m) | (prmt2(a.nf4_h[6], a.nf4_h[7], s) & m);
      A[2 * h] = prmt2(lo, hi, 0x5140u), A[2 * h + 1] = prmt2(lo, hi, 0x7362u);
    }
  }
};

void launch_nf4(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Nf4>(a, r, s); }
void launch_mma_nf4(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Nf4>(a, s); }
void launch_stream_nf4(const GemvArgs& a, cudaStream_t s) { launch_gemv_stream<Nf4, WeightKind::nf4>(a, s); }

}  // namespace nibble::cuda::detail

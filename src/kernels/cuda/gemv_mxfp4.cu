// MXFP4 GEMV: block 32 (one lane chunk), E8M0 scale, FP4 bit-placement decode. Serialized layout.
#include "gemv.cuh"
#include "gemv_mma.cuh"
#include "gemv_stream.cuh"

namespace nibble::cuda::detail {

struct Mxfp4 {
  static constexpr int kChunkK = 32, kChunkBytes = 16, kGroupK = 32, kLutSize = 0;
  static constexpr float kOutFactor = kFp4BitsFactor, kHalfFactor = 128.0f;  // decode8_h: value * 2^-7
  static __device__ __forceinline__ size_t q_row_bytes(int K) { return size_t(K) / 2; }
  static __device__ __forceinline__ size_t s_row_bytes(int K) { return size_t(K) / 32; }
  struct Meta {
    float s;
  };
  static __device__ __forceinline__ Meta load_meta(const uint8_t* srow, const GemvArgs&, int c) {
    return {e8m0_to_float(__ldg(srow + c))};
  }
  static __device__ __forceinline__ float scale(const Meta& m, int, const GemvArgs&) { return m.s; }
  static __device__ __forceinline__ void decode8_h(const uint4 (&w)[1], int e, const Meta&, const GemvArgs&,
                                                   uint32_t (&h)[4]) {
    const uint32_t x = word_of(w, e);
#pragma unroll
    for (int p = 0; p < 4; ++p) h[p] = hmul2_bits(fp4x2_bits_h(x, p), kFp16TwoPow7x2);
  }
  static __device__ float lut_entry(const GemvArgs&, int) { return 0.0f; }
  static constexpr bool kNormFused = norm_fused_kind(WeightKind::mxfp4);  // gemv_args.h
};

// The tensor-core GEMV's MXFP4 (gemv_mma.cuh): the tile layout carries, per row and 64-element
// chunk, the fp16 exponent fields f of its two blocks' scales relative to the tensor's largest
// (repack.h, mxfp4_tile_exponents), so each decoded fp16 pair is scaled exactly in fp16 as NVFP4's
// are and the mma accumulators run over the whole row; the dispatcher puts the 2^(hi - 142) back
// into the output scale (DeviceWeight::mma_out_factor).
struct Mxfp4Tiles {
  static constexpr int kGroupK = 32, kTileScaleBytes = 2;
  static constexpr float kOutFactor = kFp4BitsFactor;
  static constexpr bool kScaledH = true;
  struct Meta {
    uint32_t s;  // one block's exponent field f
  };
  static __device__ __forceinline__ size_t s_row_bytes(int K) { return size_t(K) / 32; }
  // S = 2^(f - 15) in both halves is f << 10 there (f <= 30: a normal fp16 or, for f = 0, zero).
  static __device__ __forceinline__ void chunk_scales_h(const Meta& lo, const Meta& hi, uint32_t (&S)[4]) {
    S[0] = S[1] = lo.s * 0x04000400u;
    S[2] = S[3] = hi.s * 0x04000400u;
  }
  static __device__ __forceinline__ void decode_h(uint32_t x, const Meta&, const Meta&, uint32_t s0, uint32_t s1,
                                                  const GemvArgs&, uint32_t (&A)[4]) {
#pragma unroll
    for (int p = 0; p < 4; ++p) A[p] = hmul2_bits(fp4x2_bits_h(x, p), (p & 1) ? s1 : s0);
  }
};

void launch_mxfp4(const GemvArgs& a, int r, cudaStream_t s) { launch_fp4_gemv<Mxfp4>(a, r, s); }
void launch_mma_mxfp4(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Mxfp4Tiles>(a, s); }
void launch_stream_mxfp4(const GemvArgs& a, cudaStream_t s) { launch_gemv_stream<Mxfp4Tiles, WeightKind::mxfp4>(a, s); }

}  // namespace nibble::cuda::detail

// MXFP4 GEMV: block 32 (one lane chunk), E8M0 scale, FP4 bit-placement decode. Serialized layout.
#include "gemv.cuh"
#include "gemv_mma.cuh"

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
  static constexpr int kLutHalf = 0;
  static constexpr bool kScaledH = false;  // scaled in FP32 once per group
  static __device__ __forceinline__ void decode_h(uint32_t x, const Meta&, const Meta&, int, const GemvArgs&,
                                                  const __half*, uint32_t (&A)[4]) {
#pragma unroll
    for (int p = 0; p < 4; ++p) A[p] = fp4x2_bits_h(x, p);
  }
};

void launch_mxfp4(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Mxfp4>(a, r, s); }
void launch_mma_mxfp4(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Mxfp4>(a, s); }

}  // namespace nibble::cuda::detail

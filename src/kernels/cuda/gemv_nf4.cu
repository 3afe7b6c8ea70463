// NF4 (blocksize 64) fused GEMV: codes as serialized, FP32 absmax per block; the 16 levels live in
// a shared-memory table (16 words in 16 banks: a warp's lookups never conflict). No FP16 weight
// is ever written out.
#include "gemv.cuh"
#include "gemv_mma.cuh"
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
  static __device__ __forceinline__ Meta load_meta(const uint8_t* srow, const GemvArgs&, int c) {
    return {__ldg(reinterpret_cast<const float*>(srow) + c / 2)};
  }
  static __device__ __forceinline__ float scale(const Meta& m, int, const GemvArgs&) { return m.absmax; }
  static __device__ __forceinline__ void decode8(const uint4 (&w)[1], int e, const Meta&, const GemvArgs&,
                                                 const float* lut, float2 (&d)[4]) {
    const uint32_t x = word_of(w, e);
#pragma unroll
    for (int p = 0; p < 4; ++p) d[p] = make_float2(lut[(x >> (4 * p)) & 15u], lut[(x >> (4 * p + 16)) & 15u]);
  }
  static __device__ float lut_entry(const GemvArgs&, int i) { return kNf4Levels[i]; }
  // Tensor-core path: the levels rounded to fp16 (as bitsandbytes' fp16 dequantization does).
  static constexpr int kLutHalf = 16;
  static constexpr bool kScaledH = false;  // scaled in FP32 once per group
  static __device__ __forceinline__ void decode_h(uint32_t x, const Meta&, const Meta&, int, const GemvArgs&,
                                                  const __half* lut, uint32_t (&A)[4]) {
#pragma unroll
    for (int p = 0; p < 4; ++p)
      A[p] = uint32_t(__half_as_ushort(lut[(x >> (4 * p)) & 15u])) |
             (uint32_t(__half_as_ushort(lut[(x >> (4 * p + 16)) & 15u])) << 16);
  }
};

void launch_nf4(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Nf4>(a, r, s); }
void launch_mma_nf4(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Nf4>(a, s); }

}  // namespace nibble::cuda::detail

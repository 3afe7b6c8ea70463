// Plain FP16 weights on CUDA cores: the serialized row-major layout as is, a lane chunk is 16 bytes
// (8 halves), no scales. At a few rows the GEMV reads a stacked q/k/v or gate/up weight in one
// launch (outputs split, SwiGLU fused) where cuBLAS needs a second kernel; larger M goes to cuBLAS.
#include "gemv.cuh"

namespace nibble::cuda::detail {

struct Fp16Plain {
  static constexpr int kChunkK = 8, kChunkBytes = 16, kGroupK = 8, kLutSize = 0;
  static constexpr float kOutFactor = 1.0f;
  static __device__ __forceinline__ size_t q_row_bytes(int K) { return size_t(K) * 2; }
  static __device__ __forceinline__ size_t s_row_bytes(int) { return 0; }
  struct Meta {};
  static __device__ __forceinline__ Meta load_meta(const uint8_t*, const GemvArgs&, int) { return {}; }
  static __device__ __forceinline__ float scale(const Meta&, int, const GemvArgs&) { return 1.0f; }
  // Pair p: elements p and p + 4 of the chunk (words p / 2 and 2 + p / 2, half p % 2).
  static __device__ __forceinline__ void decode8(const uint4 (&w)[1], int, const Meta&, const GemvArgs&,
                                                 const float*, float2 (&d)[4]) {
    const uint32_t lo[2] = {w[0].x, w[0].y}, hi[2] = {w[0].z, w[0].w};
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const uint32_t s = 16 * (p & 1);
      d[p] = make_float2(__half2float(__ushort_as_half(uint16_t(lo[p / 2] >> s))),
                         __half2float(__ushort_as_half(uint16_t(hi[p / 2] >> s))));
    }
  }
  static __device__ float lut_entry(const GemvArgs&, int) { return 0.0f; }
};

void launch_fp16(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Fp16Plain>(a, r, s); }

}  // namespace nibble::cuda::detail

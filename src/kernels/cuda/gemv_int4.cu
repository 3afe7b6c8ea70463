// INT4 asymmetric group-128 GEMV. Kernel layout: codes as serialized (row-major, two per byte);
// per group one 32-bit word {fp16 scale, fp16 1024 + zero point} (repacked from the FP16 scales
// and the 4-bit qzeros plane), so (q - z) is one HSUB2 or HFMA2 on the magic-number decode of q.
#include "decode_stack.cuh"
#include "gemv.cuh"
#include "gemv_mma.cuh"
#include "gemv_stream.cuh"

namespace nibble::cuda::detail {

struct Int4G128 {
  static constexpr int kChunkK = 32, kChunkBytes = 16, kGroupK = 128, kLutSize = 0;
  // tensor cores: q - z; CUDA-core half path: (q - z) * 2^-8 (gemv.cuh chunk_dot's range)
  static constexpr float kOutFactor = 1.0f, kHalfFactor = 256.0f;
  static __device__ __forceinline__ size_t q_row_bytes(int K) { return size_t(K) / 2; }
  static __device__ __forceinline__ size_t s_row_bytes(int K) { return size_t(K) / 128 * 4; }
  struct Meta {
    uint32_t sz;  // low half: scale; high half: 1024 + z
  };
  static constexpr int kMetaBytes = 4;  // one group's metadata element (the tile kernels' copies)
  static __device__ __forceinline__ Meta meta_of(uint32_t raw, const GemvArgs&) { return {raw}; }
  static __device__ __forceinline__ Meta load_meta(const uint8_t* srow, const GemvArgs& a, int c) {
    return meta_of(__ldg(reinterpret_cast<const unsigned int*>(srow) + c / 4), a);
  }
  static __device__ __forceinline__ float scale(const Meta& m, int, const GemvArgs&) {
    return __half2float(__ushort_as_half(uint16_t(m.sz & 0xFFFFu)));
  }
  static __device__ __forceinline__ void decode8_h(const uint4 (&w)[1], int e, const Meta& m, const GemvArgs&,
                                                   uint32_t (&h)[4]) {
    const uint32_t x = word_of(w, e);
    // -(1024 + z) * 2^-8 in both halves: (1024 + q) * 2^-8 plus it is (q - z) * 2^-8, exact
    const __half2 nz = __hmul2(__half2half2(__ushort_as_half(uint16_t(m.sz >> 16))), __float2half2_rn(-0x1p-8f));
    int4x8_scaled_minus_zero_h(x, nz, h);
  }
  static __device__ float lut_entry(const GemvArgs&, int) { return 0.0f; }
  static constexpr bool kNormFused = norm_fused_kind(WeightKind::int4_g128);  // gemv_args.h
  static constexpr bool kScaledH = false;  // scaled in FP32 once per group
  static constexpr bool kMmaTwoChunks = true;  // gemv_mma.cuh's mma_two_chunks
  static constexpr float kOddPairsTimes = 16.0f;  // rows g + 8 decode as 16 (q - z): no shift (decode.cuh)
  static __device__ __forceinline__ void decode_h(uint32_t x, const Meta& m0, const Meta& m1, const GemvArgs&,
                                                  uint32_t (&A)[4]) {
    const __half2 z0 = __half2half2(__ushort_as_half(uint16_t(m0.sz >> 16)));
    const __half2 z1 = __half2half2(__ushort_as_half(uint16_t(m1.sz >> 16)));
    int4x8_minus_zero_h(x, z0, z1, A);
  }
};

void launch_int4_g128(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Int4G128>(a, r, s); }
void launch_mma_int4_g128(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Int4G128>(a, s); }
void launch_stream_int4_g128(const GemvArgs& a, cudaStream_t s) {
  launch_gemv_stream<Int4G128, WeightKind::int4_g128>(a, s);
}
void launch_stack_int4_g128(const StackArgs& a, cudaStream_t s) { launch_decode_stack<Int4G128>(a, s); }

}  // namespace nibble::cuda::detail

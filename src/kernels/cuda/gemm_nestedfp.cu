// NestedFP GEMMs (paper 004): the FP16 mode rebuilds each FP16 weight from its two byte planes in
// registers (branch-free, bit-exact, ../shared/FORMATS.md) right before the fp16 mma; the FP8 mode
// feeds the upper plane (E4M3, = w * 2^8) to the e4m3 mma, after a per-token E4M3 quantization of
// the activations, and applies 2^-8 / sx in the epilogue.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <string>

#include "gemm_kernels.cuh"
#include "gemm_launch.cuh"
#include "nestedfp8_lt.h"
#include "nestedfp_rebuild.cuh"
#include "nibble/error.h"
#include "reduce.cuh"

namespace nibble::cuda {
namespace tc {
namespace {

// Both planes, 64 bytes (= 64 k) of each row per stage, in KOrder::nested; +16 padding.
struct NestedF16 {
  struct Params {
    const uint8_t* upper;
    const uint8_t* lower;
    int N;
    int64_t K;
  };
  static constexpr int kStride = 64 + 16;
  template <int BN>
  static constexpr int stage_bytes() {
    return 2 * BN * kStride;
  }

  template <class T>
  __device__ __forceinline__ static void load_stage(uint8_t* Bs, const Params& p, int n0, int kt) {
    constexpr int per_plane = T::BN * 4, total = 2 * per_plane;
#pragma unroll
    for (int i = 0; i < (total + T::THREADS - 1) / T::THREADS; ++i) {
      const int c = threadIdx.x + i * T::THREADS;
      if (c >= total) break;
      const int plane = c / per_plane, cc = c % per_plane, r = cc >> 2, col = cc & 3;
      const bool ok = n0 + r < p.N;
      const uint8_t* base = plane ? p.lower : p.upper;
      const uint8_t* src = ok ? base + int64_t(n0 + r) * p.K + int64_t(kt) * 64 + col * 16 : base;
      cp_async16(Bs + (plane * T::BN + r) * kStride + col * 16, src, ok);
    }
  }

  // Thread t's fragment takes k 16 ks + 4 t .. + 3 (gemm_core.cuh's order); in KOrder::nested those
  // are two byte pairs 16 bytes apart, half t / 2 of the words at 32 (t % 2) + 4 ks and 16 after it.
  // (Threads t and t + 2 read the same words: a 2-way bank conflict the padding cannot avoid.)
  __device__ __forceinline__ static uint32_t plane_bytes(const uint8_t* row_bytes, int t, int ks) {
    const uint8_t* w = row_bytes + 32 * (t & 1) + 4 * ks;
    return __byte_perm(*reinterpret_cast<const uint32_t*>(w), *reinterpret_cast<const uint32_t*>(w + 16),
                       t & 2 ? 0x7632 : 0x5410);
  }

  template <class T>
  __device__ __forceinline__ static void fragment(const uint8_t* Bs, const Params&, int row, int t, int ks,
                                                  uint32_t (&b)[2]) {
    const uint32_t u = plane_bytes(Bs + row * kStride, t, ks);
    const uint32_t l = plane_bytes(Bs + (T::BN + row) * kStride, t, ks);
    nestedfp_rebuild(u, l, b[0], b[1]);
  }
};

// The upper plane alone, 128 bytes (= 128 k) of each row per stage; +32: conflict-free 8-byte loads.
struct PlaneE4M3 {
  struct Params {
    const uint8_t* upper;
    int N;
    int64_t K;
  };
  static constexpr int kStride = 128 + 32;
  template <int BN>
  static constexpr int stage_bytes() {
    return BN * kStride;
  }

  template <class T>
  __device__ __forceinline__ static void load_stage(uint8_t* Bs, const Params& p, int n0, int kt) {
    constexpr int total = T::BN * 8;
#pragma unroll
    for (int i = 0; i < (total + T::THREADS - 1) / T::THREADS; ++i) {
      const int c = threadIdx.x + i * T::THREADS;
      if (c >= total) break;
      const int r = c >> 3, col = c & 7;
      const bool ok = n0 + r < p.N;
      const uint8_t* src = ok ? p.upper + int64_t(n0 + r) * p.K + int64_t(kt) * 128 + col * 16 : p.upper;
      cp_async16(Bs + r * kStride + col * 16, src, ok);
    }
  }

  template <class T>
  __device__ __forceinline__ static void fragment(const uint8_t* Bs, const Params&, int row, int t, int ks,
                                                  uint32_t (&b)[2]) {
    const uint2 v = *reinterpret_cast<const uint2*>(Bs + row * kStride + ks * 32 + 8 * t);
    b[0] = v.x, b[1] = v.y;
  }
};

// One block per row: amax, then E4M3(x * sx) with round-to-nearest-even and saturation, each pair
// (k, k + 1) stored at k or, nested, at nested_position(k).
__global__ void quantize_rows_kernel(const uint16_t* x, int K, uint8_t* x8, float* row_scale, bool nested) {
  const int m = blockIdx.x;
  const __half* row = reinterpret_cast<const __half*>(x) + int64_t(m) * K;
  float amax = 0.0f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) amax = fmaxf(amax, fabsf(__half2float(row[k])));
  __shared__ float scratch[32];
  amax = cuda::detail::block_max(amax, scratch);
  const float sx = amax > 0.0f ? 448.0f / amax : 1.0f;
  if (threadIdx.x == 0) row_scale[m] = 1.0f / (256.0f * sx);
  uint16_t* out = reinterpret_cast<uint16_t*>(x8 + int64_t(m) * K);
  for (int k = 2 * threadIdx.x; k < K; k += 2 * blockDim.x) {
    const float2 v = make_float2(__half2float(row[k]) * sx, __half2float(row[k + 1]) * sx);
    out[(nested ? nested_position(k) : k) / 2] = __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3);
  }
}

void check_shape(int M, int N, int K, int k_multiple, const char* what) {
  if (M < 1 || N < 8 || K < k_multiple || N % 8 != 0 || K % k_multiple != 0)
    throw Error(std::string(what) + ": unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " (need M >= 1, N a multiple of 8, K a multiple of " +
                std::to_string(k_multiple) + ")");
}

}  // namespace

void nestedfp16(const uint16_t* x, int M, const uint8_t* upper, const uint8_t* lower, int N, int K, uint16_t* y,
                GemmWorkspace& ws, int split_k, cudaStream_t stream) {
  check_shape(M, N, K, 64, "nestedfp GEMM");
  Problem p{reinterpret_cast<const uint8_t*>(x), int64_t(K) * 2, M, N, nullptr, 1.0f, y};
  launch<MmaF16, NestedF16>(p, NestedF16::Params{upper, lower, N, K}, ws, split_k, stream);
}

}  // namespace tc

void quantize_rows_e4m3(const uint16_t* x, int M, int K, uint8_t* x8, float* row_scale, cudaStream_t stream,
                        KOrder order) {
  check_quantize_shape("quantize_rows_e4m3", M, K, order, 2);
  tc::quantize_rows_kernel<<<M, 256, 0, stream>>>(x, K, x8, row_scale, order == KOrder::nested);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

void gemm_e4m3(const uint8_t* x8, const float* row_scale, int M, const uint8_t* upper, int N, int K, uint16_t* y,
               GemmWorkspace& ws, cudaStream_t stream, const GemmOptions& opt) {
  tc::check_shape(M, N, K, 128, "nestedfp8 GEMM");
  if (tc::compute_capability() < 89) throw Error("nestedfp8 GEMM: needs FP8 tensor cores (compute capability 8.9+)");
  tc::Problem p{x8, int64_t(K), M, N, row_scale, 1.0f, y};
  tc::launch<tc::MmaE4M3, tc::PlaneE4M3>(p, tc::PlaneE4M3::Params{upper, N, K}, ws, opt.split_k, stream);
}

}  // namespace nibble::cuda

#pragma once
// The tensor-core GEMM main loop shared by every gemm_*.cu kernel: Y[M, N] = X[M, K] · W[N, K]^T
// with mma.sync, a multi-stage cp.async pipeline, optional split-K (partials to an fp32 workspace)
// and an epilogue that scales by alpha * row_scale[m].
//
// A (activations) is staged as raw bytes, 128 bytes of each row per stage: 64 fp16 (m16n8k16) or
// 128 e4m3 (m16n8k32), i.e. four 32-byte k-steps. Each k-step is read with the K order permuted
// the same way for A and B, so that every thread's fragment is contiguous (one 8-byte load of A per 8 rows, one 4- or
// 8-byte load of B); a dot product does not care about the order of its terms:
//   fp16: physical halves 4t..4t+1 -> logical k 2t..2t+1, 4t+2..4t+3 -> logical k 2t+8..2t+9
//   e4m3: physical bytes 8t..8t+3 -> logical k 4t..4t+3,   8t+4..8t+7 -> logical k 16+4t..19+4t
// (t = lane % 4). The B operand (BOp) owns its shared-memory layout and turns its bytes into the
// two 32-bit B registers of one n8 column block for one k-step (dequantizing there when it must).
#include <cuda_fp16.h>

#include <cstdint>

namespace nibble::cuda::tc {

constexpr int kStageABytes = 128;      // A bytes per row per stage
constexpr int kAStride = 128 + 32;     // +32: conflict-free 8-byte fragment loads (rows 0..3 of a half-warp)
constexpr int kKSteps = 4;             // 32-byte k-steps per stage

struct EpilogueArgs {
  uint16_t* y = nullptr;           // [M, N] fp16, when splits == 1
  float* partial = nullptr;        // [splits, M, N] fp32, when splits > 1
  const float* row_scale = nullptr;  // [M] or null
  float alpha = 1.0f;
  int M = 0, N = 0;
};

struct MainArgs {
  const uint8_t* a = nullptr;  // [M, K] activations (fp16 or e4m3 bytes)
  int64_t a_row_bytes = 0;
  int M = 0, N = 0;
  int k_tiles = 0;             // stages along the whole K
  int tiles_per_split = 0;
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy; valid == false fills the destination with zeros (src is not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
// 4 bytes (zero-filled when !valid), through L1.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// D += A · B, fp16 inputs, fp32 accumulators.
struct MmaF16 {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm(  // not volatile: lets the scheduler move loads and dequantization across the mma
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// D += A · B, e4m3 inputs, fp32 accumulators (sm_89 and newer; other targets never launch it).
struct MmaE4M3 {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm(  // not volatile: lets the scheduler move loads and dequantization across the mma
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();
#endif
  }
};

template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MT = WM / 16, NT = WN / 8;
  static constexpr int A_STAGE_BYTES = BM * kAStride;
  static_assert(WM % 16 == 0 && WN % 8 == 0, "warp tile must be whole mma tiles");
};

template <class T, class BOp>
constexpr int smem_bytes() {
  return T::STAGES * (T::A_STAGE_BYTES + BOp::template stage_bytes<T::BN>());
}

template <class T>
__device__ __forceinline__ void load_a_stage(uint8_t* As, const MainArgs& g, int m0, int kt) {
  constexpr int chunks = T::BM * 8;  // 8 x 16 bytes per row
#pragma unroll
  for (int i = 0; i < (chunks + T::THREADS - 1) / T::THREADS; ++i) {
    int c = threadIdx.x + i * T::THREADS;
    if (chunks % T::THREADS != 0 && c >= chunks) break;
    int r = c >> 3, col = c & 7;
    bool ok = m0 + r < g.M;
    const uint8_t* src = ok ? g.a + int64_t(m0 + r) * g.a_row_bytes + int64_t(kt) * kStageABytes + col * 16 : g.a;
    cp_async16(As + r * kAStride + col * 16, src, ok);
  }
}

template <class T>
__device__ __forceinline__ void store_tile(const EpilogueArgs& e, float (&acc)[T::MT][T::NT][4], int m0, int n0,
                                           int split) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / T::WARPS_N, wn = warp % T::WARPS_N;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < T::MT; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + wm * T::WM + i * 16 + g + 8 * h;
      if (m >= e.M) continue;
      const float s = e.alpha * (e.row_scale ? e.row_scale[m] : 1.0f);
#pragma unroll
      for (int j = 0; j < T::NT; ++j) {
        const int n = n0 + wn * T::WN + j * 8 + 2 * t;
        if (n >= e.N) continue;
        const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        if (e.partial) {
          float* p = e.partial + (int64_t(split) * e.M + m) * e.N + n;
          *reinterpret_cast<float2*>(p) = make_float2(v0, v1);  // scaled after the reduction
        } else {
          __half2 o = __floats2half2_rn(v0 * s, v1 * s);
          *reinterpret_cast<__half2*>(e.y + int64_t(m) * e.N + n) = o;
        }
      }
    }
  }
}

// One CTA computes a BM x BN tile of Y over its split's range of K stages.
template <class T, class Mma, class BOp>
__device__ __forceinline__ void gemm_tile(const MainArgs& g, const typename BOp::Params& bp, const EpilogueArgs& e) {
  extern __shared__ __align__(128) uint8_t smem[];
  constexpr int B_STAGE = BOp::template stage_bytes<T::BN>();
  uint8_t* As = smem;
  uint8_t* Bs = smem + T::STAGES * T::A_STAGE_BYTES;

  // M tiles vary fastest: CTAs running together share one weight tile, read once from DRAM.
  const int m0 = blockIdx.x * T::BM, n0 = blockIdx.y * T::BN, split = blockIdx.z;
  const int kt0 = split * g.tiles_per_split;
  const int nk = min(g.tiles_per_split, g.k_tiles - kt0);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / T::WARPS_N, wn = warp % T::WARPS_N;
  const int gr = lane >> 2, t = lane & 3;

  float acc[T::MT][T::NT][4];
#pragma unroll
  for (int i = 0; i < T::MT; ++i)
#pragma unroll
    for (int j = 0; j < T::NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

#pragma unroll
  for (int s = 0; s < T::STAGES - 1; ++s) {
    if (s < nk) {
      load_a_stage<T>(As + s * T::A_STAGE_BYTES, g, m0, kt0 + s);
      BOp::template load_stage<T>(Bs + s * B_STAGE, bp, n0, kt0 + s);
    }
    cp_async_commit();
  }

  for (int kt = 0; kt < nk; ++kt) {
    cp_async_wait<T::STAGES - 2>();
    __syncthreads();  // stage kt landed for everyone; everyone is done with stage kt - 1
    const int next = kt + T::STAGES - 1;
    if (next < nk) {
      const int slot = next % T::STAGES;
      load_a_stage<T>(As + slot * T::A_STAGE_BYTES, g, m0, kt0 + next);
      BOp::template load_stage<T>(Bs + slot * B_STAGE, bp, n0, kt0 + next);
    }
    cp_async_commit();

    const int slot = kt % T::STAGES;
    const uint8_t* a_st = As + slot * T::A_STAGE_BYTES;
    const uint8_t* b_st = Bs + slot * B_STAGE;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      uint32_t b[T::NT][2];
#pragma unroll
      for (int j = 0; j < T::NT; ++j) BOp::template fragment<T>(b_st, bp, wn * T::WN + j * 8 + gr, t, ks, b[j]);
      uint32_t a[T::MT][4];
#pragma unroll
      for (int i = 0; i < T::MT; ++i) {
        const uint8_t* p = a_st + (wm * T::WM + i * 16 + gr) * kAStride + ks * 32 + 8 * t;
        uint2 lo = *reinterpret_cast<const uint2*>(p);
        uint2 hi = *reinterpret_cast<const uint2*>(p + 8 * kAStride);
        a[i][0] = lo.x, a[i][1] = hi.x, a[i][2] = lo.y, a[i][3] = hi.y;
      }
#pragma unroll
      for (int i = 0; i < T::MT; ++i)
#pragma unroll
        for (int j = 0; j < T::NT; ++j) Mma::run(acc[i][j], a[i], b[j]);
    }
  }
  cp_async_wait<0>();
  store_tile<T>(e, acc, m0, n0, split);
}

}  // namespace nibble::cuda::tc

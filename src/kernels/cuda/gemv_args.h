#pragma once
// Arguments of every GEMV kernel (plain data, passed by value) and the launch helpers each
// format's .cu file exports to the dispatcher.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "nibble/cuda/weight_kind.h"

namespace nibble::cuda {
class DeviceWeight;
}
#ifdef __CUDACC__
#include "rope_rotate.cuh"
#endif

namespace nibble::cuda::detail {

struct GemvArgs {
  const uint8_t* q = nullptr;       // element codes, kernel layout, row-major [N][row bytes]
  // per-group metadata, row-major [N][groups * width]; the tile kernels of the FP32-scaled
  // formats: block-major [N / 16][groups][16] (DeviceWeight::scales_mma)
  const uint8_t* scales = nullptr;
  const uint8_t* aux = nullptr;
  const __half* x = nullptr;        // [M, K]
  __half* y = nullptr;              // [M, N]
  int M = 0, N = 0, K = 0;
  float out_scale = 1.0f;           // global scale, applied to the FP32 sums before rounding
  float sv_a = 0.0f, sv_b = 0.0f;   // RaZeR special-value magnitudes
  // RaZeR special-value magnitudes a, b times 2^-14 as fp16 bits in both halves (filled on the
  // host): a block's sv is then a select and a sign flip, no float conversion. Only constant
  // indices may be used in kernels (a dynamic index copies the whole argument block to local memory).
  uint32_t sv_h2[2] = {0, 0};
  // NF4 on tensor cores: its 16 levels as fp16, the low bytes (words 0-3, four levels per word)
  // then the high bytes (words 4-7), for the decode's byte permutes (filled on the host).
  uint32_t nf4_h[8] = {};
  // Parts of K: CUDA-core kernel, warps of a CTA that share rows; tensor-core kernel, CTAs of a
  // cluster that share row blocks (their sums meet in shared memory, sm_90).
  int k_splits = 1;
  int mma_row_blocks = 1;           // tensor-core and stream kernels: 16-row blocks per CTA (1, 2, 4)
  // Stacked weights (q/k/v or gate/up in one launch, DeviceWeight::parts): rows [0, n0) go to y
  // ([M, n0]) times out_scale, rows [n0, n0 + n1) to y1 ([M, n1]) times out_scale1, the rest to y2
  // times out_scale2. n0 = 0: one weight, every row to y ([M, N]).
  int n0 = 0, n1 = 0;
  __half* y1 = nullptr;
  __half* y2 = nullptr;
  float out_scale1 = 1.0f, out_scale2 = 1.0f;
  // A gate/up stack with interleaved rows (2i: gate i, 2i + 1: up i): y ([M, N / 2]) receives
  // silu(gate) * up, each of the two first rounded to fp16 as the unfused GEMV would, then the
  // expression of ops::silu_mul. Scales: out_scale (gate), out_scale1 (up).
  bool silu_pairs = false;
  // One plain weight (n0 = 0, no silu pairs) may write FP32 outputs [M, N] here instead of y: the
  // output layer's logits (linear_fp16_f32out).
  float* yf = nullptr;
  // One row, persistent kernel (linear_rmsnorm): X is not read from x but computed by every CTA as
  // fp16(rmsnorm(norm_res + float(norm_delta)) * norm_w) over K, in ops::add_rmsnorm's order and
  // bits (rmsnorm_row.cuh). norm_res and norm_w load before the PDL wait (the kernel just before
  // must not write them), norm_delta after it.
  const float* norm_res = nullptr;
  const __half* norm_delta = nullptr;
  const float* norm_w = nullptr;
  float norm_eps = 0.0f;
  // A q/k/v stack whose q and k rows are in RoPE pair order (DeviceWeight::rope_head_dim = rope_d
  // > 0): rows 2j and 2j + 1 of a head hold its elements j and j + d/2, and the stores put them
  // back in place. With rope_cs (linear_rope_store) the pairs are rotated first: q into y, k and v
  // into the FP16 KV cache at row (rope_slot[m] * nkv + head) * rope_max_ctx + rope_pos[m]
  // instead of y1 / y2 (ops::qk_norm_rope_store's work without a q/k norm).
  int rope_d = 0;
  const float* rope_cs = nullptr;  // [max_ctx][d]: d/2 cosines, then d/2 sines per position
  const int32_t* rope_slot = nullptr;
  const int32_t* rope_pos = nullptr;
  __half* k_cache = nullptr;       // [slots][nkv][max_ctx][d]
  __half* v_cache = nullptr;
  int rope_max_ctx = 0;
};

#ifdef __CUDACC__
// Stores output (m, row) = v * out_scale * factor (factor: the format's kOutFactor) where it goes.
__device__ __forceinline__ void store_y(const GemvArgs& a, int m, int row, float v, float factor) {
  if (a.yf) {
    a.yf[size_t(m) * a.N + row] = v * (a.out_scale * factor);
  } else if (a.n0 == 0) {
    a.y[size_t(m) * a.N + row] = __float2half_rn(v * (a.out_scale * factor));
  } else if (row < a.n0) {
    a.y[size_t(m) * a.n0 + row] = __float2half_rn(v * (a.out_scale * factor));
  } else if (row < a.n0 + a.n1) {
    a.y1[size_t(m) * a.n1 + (row - a.n0)] = __float2half_rn(v * (a.out_scale1 * factor));
  } else {
    const int n2 = a.N - a.n0 - a.n1;
    a.y2[size_t(m) * n2 + (row - a.n0 - a.n1)] = __float2half_rn(v * (a.out_scale2 * factor));
  }
}

// silu(gate) * up for the row pair (row, row + 1) of a silu_pairs stack (row even).
__device__ __forceinline__ void store_silu_pair(const GemvArgs& a, int m, int row, float vg, float vu, float factor) {
  const float g = __half2float(__float2half_rn(vg * (a.out_scale * factor)));
  const float u = __half2float(__float2half_rn(vu * (a.out_scale1 * factor)));
  a.y[size_t(m) * (a.N / 2) + row / 2] = __float2half_rn(g / (1.0f + __expf(-g)) * u);
}

// Rows row and row + 1 (row even, row < N) of a stack in RoPE pair order (rope_d > 0) for token m.
// q and k are rounded to fp16 first, as the GEMV alone writes them, then rotated as
// ops::qk_norm_rope_store rotates them: the same bits as the two kernels.
__device__ __forceinline__ void store_rope_pair(const GemvArgs& a, int m, int row, float v0, float v1, float factor) {
  const int d = a.rope_d, nqk = a.n0 + a.n1;
  const bool rotate = a.rope_cs != nullptr;
  int p = 0, s = 0;
  if (rotate) {
    p = a.rope_pos[m], s = a.rope_slot[m];
    if (p < 0 || p >= a.rope_max_ctx || s < 0) return;  // as qk_norm_rope_store: nothing written
  }
  if (row >= nqk) {  // v, in place
    if (!rotate) {
      store_y(a, m, row, v0, factor), store_y(a, m, row + 1, v1, factor);
      return;
    }
    const int n2 = a.N - nqk, r = row - nqk;
    __half* dst = a.v_cache + ((int64_t(s) * (n2 / d) + r / d) * a.rope_max_ctx + p) * d + r % d;
    dst[0] = __float2half_rn(v0 * (a.out_scale2 * factor));
    dst[1] = __float2half_rn(v1 * (a.out_scale2 * factor));
    return;
  }
  const bool is_q = row < a.n0;
  const int r = is_q ? row : row - a.n0, head = r / d, j = r % d / 2;
  const float scale = (is_q ? a.out_scale : a.out_scale1) * factor;
  float x0 = __half2float(__float2half_rn(v0 * scale)), x1 = __half2float(__float2half_rn(v1 * scale));
  __half* dst;
  if (rotate) {
    const float* cs = a.rope_cs + int64_t(p) * d;
    const RopePair t = rope_rotate(x0, x1, cs[j], cs[d / 2 + j]);
    x0 = t.a, x1 = t.b;
    dst = is_q ? a.y + int64_t(m) * a.n0 + head * d
               : a.k_cache + ((int64_t(s) * (a.n1 / d) + head) * a.rope_max_ctx + p) * d;
  } else {
    dst = is_q ? a.y + int64_t(m) * a.n0 + head * d : a.y1 + int64_t(m) * a.n1 + head * d;
  }
  dst[j] = __float2half_rn(x0), dst[j + d / 2] = __float2half_rn(x1);
}

// Outputs of rows row and row + 1 (row even) for token m: a silu pair, a RoPE pair, or two plain
// outputs. kRope = false: a kernel that never runs a RoPE stack leaves that path out (its registers:
// the fused-norm gate/up GEMV went from 119 to 121 with it, mxfp4 batch-1 decode -2.4%).
template <bool kRope = true>
__device__ __forceinline__ void store_rows2(const GemvArgs& a, int m, int row, float v0, float v1, float factor) {
  if (a.silu_pairs) {
    if (row < a.N) store_silu_pair(a, m, row, v0, v1, factor);
    return;
  }
  if constexpr (kRope) {
    if (a.rope_d) {
      if (row < a.N) store_rope_pair(a, m, row, v0, v1, factor);
      return;
    }
  }
  if (row < a.N) store_y(a, m, row, v0, factor);
  if (row + 1 < a.N) store_y(a, m, row + 1, v1, factor);
}
#endif

constexpr int kThreads = 256;  // 8 warps per CTA, each warp owns R whole rows of W
constexpr int kWarps = kThreads / 32;

// CTAs per SM the tensor-core GEMV is compiled for (its register budget), by token tiles of 8 and
// 16-row blocks per CTA, as measured best (docs/perf/tune-2026-11-23.md): one block, 3; two token
// tiles and four blocks, 1 (no spills); else 2.
constexpr int mma_ctas_per_sm(int token_tiles, int row_blocks) {
  return row_blocks == 1 ? 3 : token_tiles == 2 && row_blocks == 4 ? 1 : 2;
}

// Host switches of the one-row GEMV (gemv_switches.cpp), read from the environment once, for
// comparisons: NIBBLE_GEMV_PERSISTENT=0 turns the persistent one-row kernel off;
// NIBBLE_GEMV_PERSISTENT_ROWS=2 or 4 sets its rows per warp for every format (0: unset).
bool persistent_gemv_enabled();
int persistent_gemv_rows_override();
// Rows up to this many elements can have linear_rmsnorm's norm computed inside the GEMV (NormedX
// holds them in registers).
constexpr int kNormFusedMaxK = 4096;
// The formats whose one-row persistent GEMV takes 4 rows per warp and computes linear_rmsnorm's
// norm itself (gemv.cuh, NormedX), where that measured faster (docs/perf/fused-norm-2026-11-29.md).
// The one list: the dispatcher asks it, and those formats' policies set kNormFused from it (a kind
// named here whose policy does not would throw at launch; test_gemv_norm checks every format).
constexpr bool norm_fused_kind(WeightKind k) { return k == WeightKind::mxfp4 || k == WeightKind::int4_g128; }
// Whether the persistent kernel of a format that fuses the norm can compute linear_rmsnorm's norm
// itself: one row, one split, K up to kNormFusedMaxK (X then fits shared memory), the persistent
// kernel on. NIBBLE_FUSE_NORM=0 says no.
bool gemv_norm_fusable(int M, int K, int k_splits);

// Host: fills a.sv_h2 from a.sv_a / a.sv_b (the FP4 bit decoders' value * 2^-14 scaling).
void fill_sv_table(GemvArgs& a);
// Host: w's fields of a for its CUDA-core layout (codes, metadata, N, K, global and part scales,
// special values, a stack's part rows, SwiGLU pairs, RoPE pair order); not x, y, M or the launch's choices.
void weight_args(const DeviceWeight& w, GemvArgs& a);
// Host: whether both special values of a.sv_h2 (filled) have a zero fp16 low byte, so that the
// RaZeR table decoders (razer_fp4x8_table_h) are exact; else the bit-placement select decodes.
inline bool razer_sv_fits_hi_byte(const GemvArgs& a) { return ((a.sv_h2[0] | a.sv_h2[1]) & 0xFFu) == 0; }
// Host: fills a.nf4_h from the NF4 levels rounded to fp16.
void fill_nf4_table(GemvArgs& a);

// One launcher per (format, decoder): picks the M / R instantiation. rows_per_warp is 2 or 4.
using GemvLauncher = void (*)(const GemvArgs& a, int rows_per_warp, cudaStream_t s);

void launch_nvfp4_bits(const GemvArgs&, int, cudaStream_t);
void launch_nvfp4_lut(const GemvArgs&, int, cudaStream_t);
void launch_nvfp4_razer_bits(const GemvArgs&, int, cudaStream_t);
void launch_nvfp4_razer_lut(const GemvArgs&, int, cudaStream_t);
void launch_mxfp4(const GemvArgs&, int, cudaStream_t);
void launch_fp4_g128(const GemvArgs&, int, cudaStream_t);
void launch_razer_fp4_g128(const GemvArgs&, int, cudaStream_t);
void launch_razer_fp3_g128(const GemvArgs&, int, cudaStream_t);
void launch_int4_g128(const GemvArgs&, int, cudaStream_t);
void launch_nf4(const GemvArgs&, int, cudaStream_t);
void launch_fp16(const GemvArgs&, int, cudaStream_t);

// Tensor-core (mma.sync) GEMV over the mma tile layout, for M >= 2.
using MmaLauncher = void (*)(const GemvArgs& a, cudaStream_t s);
void launch_mma_nvfp4(const GemvArgs&, cudaStream_t);
void launch_mma_nvfp4_razer(const GemvArgs&, cudaStream_t);
void launch_mma_mxfp4(const GemvArgs&, cudaStream_t);
void launch_mma_fp4_g128(const GemvArgs&, cudaStream_t);
void launch_mma_razer_fp4_g128(const GemvArgs&, cudaStream_t);
void launch_mma_int4_g128(const GemvArgs&, cudaStream_t);
void launch_mma_nf4(const GemvArgs&, cudaStream_t);

// Streaming tensor-core GEMV (sm_90, M <= 16; gemv_stream.cuh) over the same layout, every format
// with one. Its shared memory per CTA: a ring of stages (per 16-row block, 16 x cpw chunks of the
// tile layout and the FP32-scaled formats' metadata of their groups), the reduction, X [M, K].
constexpr int kRingConsumers = 16;  // consumer warps; a stage holds cpw chunks per consumer and block
constexpr int kRingThreads = 32 * (kRingConsumers + 1);
constexpr int kRingMaxStages = 8;
constexpr int kRingXParts = 4;       // X lands in this many column ranges, each with its own barrier
constexpr int kRingXPadBytes = 64;   // X rows padded: a warp's 16-byte fragment loads hit distinct banks
constexpr int kRingSmemLimit = 232448 - 1024;  // sm_90's opt-in limit less the static barriers
// A format's bytes in the ring: per block and chunk (codes, and the fp16-scaled formats' scales),
// per row and scale group of metadata (0: none besides the chunk), chunks per scale group.
struct RingShape {
  int chunk_bytes, meta_bytes, group_chunks;
};
constexpr bool same_ring_shape(const RingShape& x, const RingShape& y) {
  return x.chunk_bytes == y.chunk_bytes && x.meta_bytes == y.meta_bytes && x.group_chunks == y.group_chunks;
}
constexpr RingShape ring_shape(WeightKind k) {
  switch (k) {
    case WeightKind::nvfp4:
    case WeightKind::nvfp4_razer: return {576, 0, 1};  // 512 code bytes, 16 rows x 4 E4M3 / E3M3 scales
    case WeightKind::mxfp4: return {544, 0, 1};        // 16 rows x 2 scale exponents
    case WeightKind::fp4_g128:
    case WeightKind::razer_fp4_g128: return {512, 2, 2};  // FP16 scale words, groups of 128
    case WeightKind::int4_g128: return {512, 4, 2};       // {scale, 1024 + z} words
    case WeightKind::nf4: return {512, 4, 1};             // FP32 absmax, blocks of 64
    default: return {0, 0, 1};                            // no tile layout
  }
}
constexpr size_t ring_x_row_bytes(int K) { return size_t(K) * 2 + kRingXPadBytes; }
constexpr size_t ring_red_bytes(int NT, int RB) { return size_t(kRingConsumers) * RB * NT * 4 * 32 * sizeof(float); }
// A stage: cpw chunks per consumer warp of each of RB blocks, with their metadata.
constexpr int ring_stage_bytes(const RingShape& sh, int RB, int cpw) {
  return RB * kRingConsumers * cpw * (sh.chunk_bytes + 16 * sh.meta_bytes / sh.group_chunks);
}
constexpr size_t ring_smem_bytes(const RingShape& sh, int NT, int RB, int cpw, int M, int K, int stages) {
  return size_t(stages) * size_t(ring_stage_bytes(sh, RB, cpw)) + ring_red_bytes(NT, RB) +
         size_t(M) * ring_x_row_bytes(K);
}
// Stages that fit beside X and the reduction (at most kRingMaxStages), or 0 when fewer than two.
constexpr int ring_stages(const RingShape& sh, int NT, int RB, int cpw, int M, int K) {
  const size_t fixed = ring_smem_bytes(sh, NT, RB, cpw, M, K, 0);
  if (sh.chunk_bytes == 0 || fixed >= size_t(kRingSmemLimit)) return 0;
  const size_t n = (size_t(kRingSmemLimit) - fixed) / size_t(ring_stage_bytes(sh, RB, cpw));
  return n < 2 ? 0 : n > size_t(kRingMaxStages) ? kRingMaxStages : int(n);
}
// One launch's ring: stages, chunks per consumer warp and stage (1, 2, 4; the most that leave
// two stages), and how its waits wait (bit 0: the producer spins on its empty barriers instead of
// suspending; bit 1: the consumers on their full ones).
struct RingParams {
  int stages = 0, cpw = 1, spin = 0;
};
// The ring of w's shape for M rows of K, RB blocks (stages 0: none fits). NIBBLE_RING_CPW and
// NIBBLE_RING_SPIN override the chunks per warp (the most that fit at most it) and the waits.
RingParams ring_params(const RingShape& sh, int NT, int RB, int M, int K);
// First chunk of X's column range p (of kRingXParts) for a row of nchunks chunks.
constexpr int ring_x_part_begin(int p, int nchunks) { return p * nchunks / kRingXParts; }
void launch_stream_nvfp4(const GemvArgs&, cudaStream_t);
void launch_stream_nvfp4_razer(const GemvArgs&, cudaStream_t);
void launch_stream_mxfp4(const GemvArgs&, cudaStream_t);
void launch_stream_fp4_g128(const GemvArgs&, cudaStream_t);
void launch_stream_razer_fp4_g128(const GemvArgs&, cudaStream_t);
void launch_stream_int4_g128(const GemvArgs&, cudaStream_t);
void launch_stream_nf4(const GemvArgs&, cudaStream_t);

}  // namespace nibble::cuda::detail

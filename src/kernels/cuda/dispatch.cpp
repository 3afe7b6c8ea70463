// linear(): argument checks and the choice of kernel (format, decoder, rows per warp).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "gemm_wgmma.cuh"
#include "gemv_args.h"
#include "nibble/cuda/check.h"
#include "nibble/cuda/linear.h"
#include "nibble/cuda/ops.h"
#include "nibble/cuda/tuning.h"
#include "nibble/error.h"
#include "nibble/half.h"
#include "nibble/nf4.h"

namespace nibble::cuda {
namespace {

detail::GemvLauncher pick_launcher(WeightKind k, Fp4Decode dec) {
  using namespace detail;
  switch (k) {
    case WeightKind::nvfp4: return dec == Fp4Decode::lut ? launch_nvfp4_lut : launch_nvfp4_bits;
    case WeightKind::nvfp4_razer: return dec == Fp4Decode::lut ? launch_nvfp4_razer_lut : launch_nvfp4_razer_bits;
    case WeightKind::mxfp4: return launch_mxfp4;
    case WeightKind::fp4_g128: return launch_fp4_g128;
    case WeightKind::razer_fp4_g128: return launch_razer_fp4_g128;
    case WeightKind::razer_fp3_g128: return launch_razer_fp3_g128;
    case WeightKind::int4_g128: return launch_int4_g128;
    case WeightKind::nf4: return launch_nf4;
    case WeightKind::fp16: return launch_fp16;
  }
  return nullptr;
}

detail::MmaLauncher pick_mma_launcher(WeightKind k) {
  using namespace detail;
  switch (k) {
    case WeightKind::nvfp4: return launch_mma_nvfp4;
    case WeightKind::nvfp4_razer: return launch_mma_nvfp4_razer;
    case WeightKind::mxfp4: return launch_mma_mxfp4;
    case WeightKind::fp4_g128: return launch_mma_fp4_g128;
    case WeightKind::razer_fp4_g128: return launch_mma_razer_fp4_g128;
    case WeightKind::int4_g128: return launch_mma_int4_g128;
    case WeightKind::nf4: return launch_mma_nf4;
    default: return nullptr;
  }
}

detail::MmaLauncher pick_stream_launcher(WeightKind k) {
  using namespace detail;
  switch (k) {
    case WeightKind::nvfp4: return launch_stream_nvfp4;
    case WeightKind::nvfp4_razer: return launch_stream_nvfp4_razer;
    case WeightKind::mxfp4: return launch_stream_mxfp4;
    case WeightKind::fp4_g128: return launch_stream_fp4_g128;
    case WeightKind::razer_fp4_g128: return launch_stream_razer_fp4_g128;
    case WeightKind::int4_g128: return launch_stream_int4_g128;
    case WeightKind::nf4: return launch_stream_nf4;
    default: return nullptr;
  }
}

constexpr float kFp4BitsFactorHost = 16384.0f;  // decode.cuh's kFp4BitsFactor (2^14)

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

namespace detail {
void fill_sv_table(GemvArgs& a) {
  for (int i = 0; i < 2; ++i) {
    const uint32_t h = float_to_half((i ? a.sv_b : a.sv_a) / kFp4BitsFactorHost);
    a.sv_h2[i] = h | (h << 16);
  }
}
void fill_nf4_table(GemvArgs& a) {
  static const std::array<uint32_t, 8> table = [] {  // the levels are constants: built once
    std::array<uint32_t, 8> t{};
    for (int i = 0; i < 16; ++i) {
      const uint32_t h = float_to_half(kNF4Levels[i]);
      t[i / 4] |= (h & 0xFFu) << (8 * (i % 4));
      t[4 + i / 4] |= (h >> 8) << (8 * (i % 4));
    }
    return t;
  }();
  std::copy(table.begin(), table.end(), a.nf4_h);
}
}  // namespace detail

bool stream_kernel_fits(const DeviceWeight& w, int M, int row_blocks) {
  return w.qweight_mma && pick_stream_launcher(w.kind) && (row_blocks == 1 || row_blocks == 2) && M >= 1 &&
         M <= 16 && detail::ring_params(detail::ring_shape(w.kind), M > 8 ? 2 : 1, row_blocks, M, int(w.K)).stages > 0 &&
         wg::supported();
}

bool tensor_core_splits_supported() { return wg::supported(); }

void linear(const uint16_t* x, int M, const DeviceWeight& w, uint16_t* y, cudaStream_t stream,
            const LinearOptions& opt) {
  linear(x, M, w, std::vector<uint16_t*>{y}, stream, opt);
}

namespace {

// The kernel choice for w at M rows: the tuning table or heuristic, then opt's overrides, checked
// against what this weight and device have (throws where opt asks for what they lack).
TunedChoice resolve_choice(const DeviceWeight& w, int M, const LinearOptions& opt) {
  if (opt.rows_per_warp != 0 && opt.rows_per_warp != 2 && opt.rows_per_warp != 4)
    throw Error(fmt::format("linear '{}': rows_per_warp = {} (allowed: 0, 2, 4)", w.format, opt.rows_per_warp));
  if (opt.k_splits != 0 && !valid_k_splits(opt.k_splits))
    throw Error(fmt::format("linear '{}': k_splits = {} (allowed: 0, 1, 2, 4, 8)", w.format, opt.k_splits));
  if (opt.row_blocks != 0 && !valid_row_blocks(opt.row_blocks))
    throw Error(fmt::format("linear '{}': row_blocks = {} (allowed: 0, 1, 2, 4)", w.format, opt.row_blocks));

  TunedChoice choice = tuned_choice(w.format, w.K, w.N, M);
  const Engine tuned_engine = choice.engine;
  if (choice.engine != Engine::cuda_cores && opt.engine == Engine::cuda_cores)
    choice.rows_per_warp = default_choice(w.format, w.K, w.N, M).rows_per_warp;  // the entry tuned another engine
  if (opt.rows_per_warp) choice.rows_per_warp = opt.rows_per_warp;
  if (opt.k_splits) choice.k_splits = opt.k_splits;
  if (opt.row_blocks) choice.row_blocks = opt.row_blocks;
  if (opt.fp4_decode != Fp4Decode::automatic) choice.fp4_decode = opt.fp4_decode;
  if (opt.engine != Engine::automatic) choice.engine = opt.engine;
  if (choice.engine == Engine::tensor_stream && !stream_kernel_fits(w, M, choice.row_blocks)) {
    if (opt.engine == Engine::tensor_stream)
      throw Error(fmt::format("linear '{}': no stream kernel for this format / M = {} / K = {} / row_blocks = {} on "
                              "this device (needs a tile layout, row_blocks 1 or 2, X [M, K] in shared memory beside "
                              "the ring, sm_90)",
                              w.format, M, w.K, choice.row_blocks));
    choice.engine = Engine::tensor_cores;  // a table entry that does not fit this device or M
  }
  const detail::MmaLauncher mma = w.qweight_mma ? pick_mma_launcher(w.kind) : nullptr;
  if (choice.engine == Engine::tensor_cores && !mma) {
    if (opt.engine == Engine::tensor_cores)
      throw Error(fmt::format("linear '{}': no tensor-core kernel for this format / K = {} (needs K % 64 == 0; MXFP4 "
                              "also block scales spanning at most 2^24)",
                              w.format, w.K));
    choice.engine = Engine::cuda_cores;
  }

  if (choice.engine != tuned_engine && !opt.k_splits)  // the splits of the engine that runs
    choice.k_splits = default_k_splits(choice.engine, w.format, w.K, w.N, M, choice.row_blocks);
  if (choice.engine == Engine::tensor_cores && choice.k_splits > 1 && !tensor_core_splits_supported()) {
    if (opt.k_splits > 1)
      throw Error(fmt::format("linear '{}': k_splits = {} on tensor cores needs an sm_90 GPU (thread-block clusters)",
                              w.format, opt.k_splits));
    choice.k_splits = 1;
  }
  return choice;
}

// Whether the chosen kernel computes linear_rmsnorm's norm itself: the persistent one-row
// CUDA-core GEMV of the formats in norm_fused_kind (gemv_args.h).
bool norm_fuses(const DeviceWeight& w, const TunedChoice& c, int M) {
  return detail::norm_fused_kind(w.kind) && c.engine == Engine::cuda_cores &&
         detail::gemv_norm_fusable(M, int(w.K), c.k_splits);
}

void check_linear(const uint16_t* x, int M, const DeviceWeight& w, const std::vector<uint16_t*>& ys, size_t parts) {
  if (ys.size() != parts)
    throw Error(fmt::format("linear '{}': {} outputs for a weight of {} part(s)", w.format, ys.size(), parts));
  for (uint16_t* y : ys)
    if (!y) throw Error(fmt::format("linear '{}': null output pointer", w.format));
  if (M < 1 || M > 16) throw Error(fmt::format("linear '{}': M = {} is outside 1..16", w.format, M));
  if (!w.qweight) throw Error(fmt::format("linear '{}': the weight was not uploaded", w.format));
  if (!x || !aligned16(x)) throw Error(fmt::format("linear '{}': x must be a 16-byte aligned device pointer", w.format));
}

// The RoPE fields of a for a stack in pair order (rope: rotate and store into the KV cache).
void set_rope(detail::GemvArgs& a, const DeviceWeight& w, const RopeStore* rope) {
  if (!rope) return;
  const char* fn = "linear_rope_store";
  if (w.rope_head_dim == 0)  // upload_stacked gives it to q/k/v stacks only
    throw Error(fmt::format("{} '{}': the weight is not a q/k/v stack in RoPE pair order", fn, w.format));
  if (!rope->cos_sin || !rope->slot || !rope->pos || !rope->k_cache || !rope->v_cache || rope->max_ctx <= 0)
    throw Error(fmt::format("{} '{}': cos_sin, slot, pos, k_cache and v_cache must be device pointers, max_ctx > 0",
                            fn, w.format));
  a.rope_cs = rope->cos_sin, a.rope_slot = rope->slot, a.rope_pos = rope->pos, a.rope_max_ctx = rope->max_ctx;
  a.k_cache = reinterpret_cast<__half*>(rope->k_cache), a.v_cache = reinterpret_cast<__half*>(rope->v_cache);
  a.y1 = a.y2 = nullptr;  // k and v go to the cache only
}

// linear(), linear_rmsnorm() (norm: the add + RMSNorm in front; x then its scratch) and
// linear_rope_store() (rope).
void run_linear(const uint16_t* x, const RmsNormInput* norm, const RopeStore* rope, int M, const DeviceWeight& w,
                const std::vector<uint16_t*>& ys, cudaStream_t stream, const LinearOptions& opt) {
  const size_t parts = w.silu_pairs ? 1 : std::max<size_t>(1, w.part_rows.size());
  check_linear(x, M, w, ys, parts);
  const TunedChoice choice = resolve_choice(w, M, opt);

  detail::GemvArgs a;
  if (norm) {
    if (!norm->res || !norm->delta || !norm->w)
      throw Error(fmt::format("linear_rmsnorm '{}': res, delta and w must be device pointers", w.format));
    if (norm_fuses(w, choice, M)) {
      a.norm_res = norm->res, a.norm_delta = reinterpret_cast<const __half*>(norm->delta);
      a.norm_w = norm->w, a.norm_eps = norm->eps;
    } else {
      ops::rmsnorm_of_sum(norm->res, norm->delta, norm->w, M, int(w.K), norm->eps, norm->xn, stream);
    }
  }
  detail::weight_args(w, a);
  a.x = reinterpret_cast<const __half*>(x);
  a.y = reinterpret_cast<__half*>(ys[0]);
  a.M = M;
  if (!w.silu_pairs && parts > 1) {  // a stack: per-part outputs
    a.y1 = reinterpret_cast<__half*>(ys[1]);
    if (parts > 2) a.y2 = reinterpret_cast<__half*>(ys[2]);
    set_rope(a, w, rope);
  }
  a.k_splits = choice.k_splits;
  a.mma_row_blocks = choice.row_blocks;
  if (choice.engine == Engine::tensor_stream || choice.engine == Engine::tensor_cores) {  // the tile layout
    a.q = static_cast<const uint8_t*>(w.qweight_mma);
    if (w.scales_mma) a.scales = static_cast<const uint8_t*>(w.scales_mma);
    a.out_scale *= w.mma_out_factor, a.out_scale1 *= w.mma_out_factor, a.out_scale2 *= w.mma_out_factor;
    if (w.kind == WeightKind::nf4) detail::fill_nf4_table(a);
    (choice.engine == Engine::tensor_stream ? pick_stream_launcher(w.kind) : pick_mma_launcher(w.kind))(a, stream);
  } else {
    pick_launcher(w.kind, choice.fp4_decode)(a, choice.rows_per_warp, stream);
  }
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void detail::weight_args(const DeviceWeight& w, GemvArgs& a) {
  a.q = static_cast<const uint8_t*>(w.qweight);
  a.scales = static_cast<const uint8_t*>(w.scales);
  a.aux = static_cast<const uint8_t*>(w.aux);
  a.N = int(w.N), a.K = int(w.K);
  a.out_scale = w.global_scale, a.sv_a = w.sv_a, a.sv_b = w.sv_b;
  if (w.silu_pairs) {  // one output: silu(gate) * up
    a.silu_pairs = true;
    a.out_scale = w.part_scales[0], a.out_scale1 = w.part_scales[1];
  } else if (w.part_rows.size() > 1) {  // a stack: per-part global scales
    a.n0 = int(w.part_rows[0]), a.n1 = int(w.part_rows[1]);
    a.out_scale = w.part_scales[0], a.out_scale1 = w.part_scales[1];
    if (w.part_rows.size() > 2) a.out_scale2 = w.part_scales[2];
    a.rope_d = w.rope_head_dim;
  }
  fill_sv_table(a);
}

void linear(const uint16_t* x, int M, const DeviceWeight& w, const std::vector<uint16_t*>& ys, cudaStream_t stream,
            const LinearOptions& opt) {
  run_linear(x, nullptr, nullptr, M, w, ys, stream, opt);
}

void linear_rope_store(const uint16_t* x, int M, const DeviceWeight& w, uint16_t* yq, const RopeStore& rope,
                       cudaStream_t stream, const LinearOptions& opt) {
  // y1 / y2 are not written: k and v go to the cache (check_linear wants three outputs)
  run_linear(x, nullptr, &rope, M, w, {yq, yq, yq}, stream, opt);
}

void linear_rmsnorm(const RmsNormInput& in, int M, const DeviceWeight& w, const std::vector<uint16_t*>& ys,
                    cudaStream_t stream, const LinearOptions& opt) {
  run_linear(in.xn, &in, nullptr, M, w, ys, stream, opt);
}

bool linear_fuses_rmsnorm(const DeviceWeight& w, int M, const LinearOptions& opt) {
  return w.qweight && M >= 1 && M <= 16 && norm_fuses(w, resolve_choice(w, M, opt), M);
}

void linear_fp16_f32out(const uint16_t* x, const uint16_t* w, int64_t N, int64_t K, float* y, cudaStream_t stream) {
  if (N < 1 || N > INT32_MAX || K < 8 || K % 8 != 0 || K > INT32_MAX)
    throw Error(fmt::format("linear_fp16_f32out: W is [{}, {}] (N >= 1, K a positive multiple of 8)", N, K));
  if (!x || !w || !y || !aligned16(x) || !aligned16(w))
    throw Error("linear_fp16_f32out: x, W (16-byte aligned) and y must be device pointers");
  detail::GemvArgs a;
  a.q = reinterpret_cast<const uint8_t*>(w);
  a.x = reinterpret_cast<const __half*>(x);
  a.yf = y;
  a.M = 1, a.N = int(N), a.K = int(K);
  a.k_splits = default_k_splits(Engine::cuda_cores, "fp16", K, N, 1, 1);
  detail::launch_fp16(a, 2, stream);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nibble::cuda

#pragma once
// The whole-stack decode kernel's arguments (decode_stack.cuh): every layer of a one-row decode step
// in one persistent launch, its weights streamed through a shared-memory ring that never waits on
// the layers' data dependencies (docs/gpu-runtime.md, "One kernel for the layers").
#include <cstdint>

#include "gemv_args.h"

namespace nibble::cuda::detail {

constexpr int kStackConsumers = 15;  // consumer warps per CTA; one producer warp besides (16 warps: 128 registers)
constexpr int kStackConsumerThreads = 32 * kStackConsumers;
constexpr int kStackThreads = kStackConsumerThreads + 32;
constexpr int kStackMaxParts = 4;    // a slot's chunks split over up to this many warps
constexpr int kStackRows = 4;        // rows of a tile, one consumer warp's unit (even: SwiGLU and RoPE pairs)
constexpr int kStackSegK = 4096;     // a tile's elements per row and ring slot (longer rows: several slots)
constexpr int kStackMaxSegs = 8;     // slots per tile: rows up to 8 x kStackSegK
constexpr int kStackMaxSlots = 64;
constexpr int kStackMaxGroup = 8;    // query heads per KV head
constexpr int kStackMaxChunks = 16;  // key chunks per KV head (attention units)
constexpr int kStackMaxH = 8192;     // hidden size: the norms hold a thread's elements in registers
constexpr size_t kStackSmemMax = 232448 - 1024;  // sm_90's opt-in limit less the kernel's static arrays

// One GEMV of a layer: the CUDA-core layout's arguments (the stores read them: RoPE and the KV
// store for q/k/v, SwiGLU pairs for gate/up; o and down add their outputs to the residual) and the
// bytes per row of its codes and metadata, and per piece of a row (one ring slot's; filled on the
// host, so that the producer's one thread does no divisions).
struct StackGemv {
  GemvArgs a;
  int q_row = 0, s_row = 0;
  int segs = 1;   // pieces of a row, kStackSegK elements each (the last fewer): slots per tile
  int parts = 1;  // warps that share a slot (1, 2, 4): GEMVs with few tiles per CTA still occupy every warp
  int seg_q[kStackMaxSegs] = {}, seg_s[kStackMaxSegs] = {};   // a piece's bytes per row: codes, metadata
  int seg_q0[kStackMaxSegs] = {}, seg_s0[kStackMaxSegs] = {};  // where it starts in a row
};
struct StackLayerArgs {
  StackGemv qkv, o, gate_up, down;  // qkv.a's k_cache / v_cache: the layer's FP16 caches, attention's too
  const float* attn_norm = nullptr;
  const float* ffn_norm = nullptr;
};
struct StackArgs {
  const StackLayerArgs* layers = nullptr;  // device array
  int n_layers = 0;
  int H = 0, I = 0, nh = 0, nkv = 0, d = 0, max_ctx = 0;
  float eps = 0.0f, qscale = 0.0f;  // qscale: 1/sqrt(d) * log2(e)
  float* x = nullptr;               // FP32 residual [H], the embedding in, the last layer's sum out
  __half* q = nullptr;              // [nh * d]
  __half* att = nullptr;            // [nh * d]
  __half* h = nullptr;              // [I]: silu(gate) * up
  const int32_t* pos = nullptr;     // [1] on the device
  const int32_t* slot = nullptr;
  float* attn_ws = nullptr;         // [nh][kStackMaxChunks][d + 2]: a chunk's unnormalized P.V, max, sum
  unsigned* sync = nullptr;         // [0]: the grid barrier's count (zero at launch); [1 + g]: chunks of KV head g done
  int ring_slots = 0, slot_bytes = 0, x_bytes = 0;
  int part_floats = 0;  // shared memory for the units' partial sums: the most any GEMV needs
  int ctas = 0;  // the grid, all resident at once: one CTA per SM (fewer in tests)
};

// Dynamic shared memory, in this order: the slots' mbarriers (full, empty), the ring, X (the widest
// GEMV input, paired; x_bytes), attention's per-warp maxima and sums, its accumulators and queries,
// the norm's scratch, the units' partial sums.
constexpr int stack_attn_bytes(int d) { return (kStackConsumers * kStackMaxGroup * 2 + kStackMaxGroup * (2 * d + 1)) * 4; }
constexpr size_t stack_smem_bytes(int slots, int slot_bytes, int x_bytes, int d, int part_floats) {
  return size_t(2 * kStackMaxSlots * 8) + size_t(slots) * size_t(slot_bytes) + size_t(x_bytes) +
         size_t(stack_attn_bytes(d)) + 32 * 4 + size_t(part_floats) * 4;
}

using StackLauncher = void (*)(const StackArgs& a, cudaStream_t s);
void launch_stack_int4_g128(const StackArgs&, cudaStream_t);
void launch_stack_fp4_g128(const StackArgs&, cudaStream_t);

}  // namespace nibble::cuda::detail

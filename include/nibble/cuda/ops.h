#pragma once
// The non-linear pieces of a Llama block on the GPU (the CUDA twin of src/model/ops.h), for the
// device backend of the model runtime (nibble/cuda/runtime.h). All pointers are device pointers;
// every function is asynchronous on `stream`, allocates nothing (so it can be captured in a CUDA
// graph) and throws nibble::Error on bad arguments or a failed launch.
//
// Conventions:
//   - the residual stream x is FP32 [T, H]; what feeds a linear layer is FP16 (bits as uint16_t);
//   - a step runs T tokens; token t belongs to KV-cache slot slot[t] and sits at position pos[t]
//     (a prefill: one slot, consecutive positions; a batched decode: one token per slot);
//   - the KV cache of one layer (KvCache) is [n_slots][nkv][max_ctx][d] elements, K and V
//     separately: FP16, or E4M3 codes with one FP32 scale per row of d;
//   - RoPE follows the HF convention (element i pairs with i + d/2); cos_sin is FP32
//     [max_ctx][d], per position d/2 cosines then d/2 sines (as the CPU Session builds it).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace nibble::cuda::ops {

// The KV cache of one layer. e4m3: a row x of d values is stored as codes E4M3(x / s) with
// s = amax(|x|) / 448 in FP32 (the registry's fp8-e4m3 format, bit for bit; s = 0 and codes 0
// for an all-zero row) and read back as e4m3(code) * s.
enum class KvType { fp16, e4m3 };
struct KvCache {
  KvType type = KvType::fp16;
  void* k = nullptr;         // [n_slots][nkv][max_ctx][d]: FP16, or E4M3 codes
  void* v = nullptr;
  float* k_scale = nullptr;  // e4m3 only: [n_slots][nkv][max_ctx]
  float* v_scale = nullptr;
  int max_ctx = 0;
};
// Device bytes of one row of d values of K (or V), its scale included.
size_t kv_row_bytes(KvType type, int d);

// x[t, :] = float(table[ids[t], :]); table FP16 [V, H]. ids are checked on the host before.
void embed(const uint16_t* table, const int32_t* ids, int T, int H, float* x, cudaStream_t stream);

// y[t] = fp16(x[t] / sqrt(mean(x[t]^2) + eps) * w), w FP32 [H].
void rmsnorm(const float* x, const float* w, int T, int H, float eps, uint16_t* y, cudaStream_t stream);

// x[t] += float(delta[t]) (then += float(delta2[t]) where delta2 is given), then y[t] =
// fp16(rmsnorm(x[t]) * w): the residual add fused with the next norm. y may be null (add only).
// x and w are read while the kernel just before it in the stream may still run (programmatic
// dependent launch), so that kernel must not write them (in a step it writes delta).
void add_rmsnorm(float* x, const uint16_t* delta, const float* w, int T, int H, float eps, uint16_t* y,
                 cudaStream_t stream, const uint16_t* delta2 = nullptr);
// y[t] = fp16(rmsnorm(x[t] + float(delta[t])) * w), x left as it is: add_rmsnorm's bits without
// the write (the norm linear_rmsnorm computes where its kernel does not; same reading rule).
void rmsnorm_of_sum(const float* x, const uint16_t* delta, const float* w, int T, int H, float eps, uint16_t* y,
                    cudaStream_t stream);

// y[t, n] += bias[n] (FP32 bias [N]) on FP16 y [T, N] (Qwen2's q/k/v biases).
void add_bias(uint16_t* y, const float* bias, int T, int N, cudaStream_t stream);

// out[i] = fp16(silu(gate[i]) * up[i]), all FP16 of n elements (out may alias gate).
void silu_mul(const uint16_t* gate, const uint16_t* up, int64_t n, uint16_t* out, cudaStream_t stream);
// The same over the output of a gate/up stack with interleaved rows, gate_up [T, 2I] (column 2i:
// gate i, 2i + 1: up i, as upload_silu_pair lays the rows out): out [T, I].
void silu_mul_pairs(const uint16_t* gate_up, int T, int I, uint16_t* out, cudaStream_t stream);

// A stacked linear's output src [T, n0 + n1 + n2] split by columns: d0 [T, n0], d1 [T, n1],
// d2 [T, n2] (n2 = 0, d2 null: two parts). pair_d > 0: the columns of parts 0 and 1 are in RoPE
// pair order for heads of pair_d (DeviceWeight::rope_head_dim) and go back in place.
void split_columns(const uint16_t* src, int T, int n0, int n1, int n2, uint16_t* d0, uint16_t* d1, uint16_t* d2,
                   cudaStream_t stream, int pair_d = 0);

// For each token t: optional per-head RMSNorm of q and k (Qwen3; q_norm / k_norm FP32 [d], null to
// skip), RoPE at pos[t] on q (in place, FP16 [T, nh*d]) and k, then k and v (FP16 [T, nkv*d])
// stored into the layer's cache at (slot[t], head, pos[t]): k from its FP32 rotation (rounded to
// fp16, or quantized to E4M3 with its row scale), v as given. d must be even (a multiple of 8 for
// e4m3). slot/pos live on the device, so the caller checks them; a token with pos outside
// [0, max_ctx) or slot < 0 is skipped.
void qk_norm_rope_store(uint16_t* q, const uint16_t* k, const uint16_t* v, int T, int nh, int nkv, int d,
                        const float* q_norm, const float* k_norm, float eps, const float* cos_sin,
                        const int32_t* slot, const int32_t* pos, const KvCache& cache, cudaStream_t stream);

// Causal attention of T queries of one sequence (a prefill chunk: slot `slot`, positions
// pos0..pos0+T-1) over cache positions 0..pos0+T-1 (this chunk's keys already stored). Tiled over
// queries and keys with an online softmax; GQA (nh a multiple of nkv). q, out FP16 [T, nh*d];
// d in {64, 128}. Scale 1/sqrt(d). q, the caches and out must be 16-byte aligned.
void attention_prefill(const uint16_t* q, int T, int slot, int pos0, const KvCache& cache, int nh, int nkv, int d,
                       uint16_t* out, cudaStream_t stream);

// Decode attention: B queries, query b of slot slot[b] at position pos[b] attends to cache
// positions 0..pos[b] of its slot. Split-K flash-decoding: the keys are cut into chunks handled by
// separate CTAs, whose partial (max, sum, acc) the last of them to finish combines. `workspace`
// must hold attention_decode_workspace_bytes(B, nh, d, max_ctx) bytes and be zero-filled before
// its first use (its chunk counters; every call leaves them zero). max_pos_hint bounds pos[b] (the
// grid is sized for it, so a captured graph stays valid while every pos[b] <= max_pos_hint).
// It runs on tensor cores (sm_80+) in chunks of 64-1024 keys sized to the resident grid, or with
// NIBBLE_ATTN_TC=0 (for comparison) on CUDA cores in chunks of 256 keys, or 128 / 64 when that grid
// would leave SMs idle. The choice depends only on (B, nh, nkv, max_pos_hint, max_ctx, the cache
// type). q, the caches and workspace must be 16-byte aligned. A row whose pos[b] is outside
// [0, max_pos_hint] (or slot[b] < 0) gets NaN outputs.
size_t attention_decode_workspace_bytes(int B, int nh, int d, int max_ctx);
// On sm_90, where a sequence's chunks are at most 2 and that costs no more (batch 16 and 64 at ~530
// keys), decode attention runs each sequence's chunk CTAs of one head block as a thread-block
// cluster that combines its partials in distributed shared memory instead of the workspace. On by
// default; off with NIBBLE_ATTN_CLUSTER=0 or set_attention_cluster(false) (tests, comparisons).
void set_attention_cluster(bool on);
void attention_decode(const uint16_t* q, int B, const int32_t* slot, const int32_t* pos, int max_pos_hint,
                      const KvCache& cache, int nh, int nkv, int d, uint16_t* out, void* workspace,
                      cudaStream_t stream);

// y = float(x) for n FP16 values (a quantized output layer's FP16 logits to FP32).
void half_to_float(const uint16_t* x, int64_t n, float* y, cudaStream_t stream);

// Per row b of FP32 logits [B, V]: entropy (nats) of softmax at temperature 1 (the ReSET signal),
// and the argmax (lowest index on ties; NaN logits never win). Either output may be null. Few rows
// are split over many CTAs, whose partial sums go to `workspace` (entropy_workspace_bytes(B, V):
// enough for any call with at most B rows).
size_t entropy_workspace_bytes(int B, int V);
void logits_entropy_argmax(const float* logits, int B, int V, float* entropy, int32_t* argmax, void* workspace,
                           cudaStream_t stream);

// One row's sampling inputs (an array of them is uploaded in one copy).
struct SampleRow {
  float temperature = 0;  // <= 0: greedy (argmax); with SampleRule::entropy, the temperature at
                          // entropy >= threshold
  float top_p = 1;        // the nucleus mass; 1 = all tokens
  float u = 0;            // the uniform draw in [0, 1)
  float t_low = 0;        // SampleRule::entropy: the temperature at entropy < threshold
  int top_k = 0;          // keep the k most probable tokens first; 0 = all
  float min_p = 0;        // then drop tokens below min_p x the top probability; 0 = none
  double threshold = 0;   // SampleRule::entropy: ReSET's entropy threshold (nats)
};
// fixed: each row's temperature as given. entropy: ReSET's rule on the device
// (ResetController::next_threshold): temperature when double(entropy) >= threshold, else t_low,
// the comparison the host rule makes.
enum class SampleRule { fixed, entropy };

// Per row b: draws a token from softmax(logits[b] / T) restricted to the top_k most probable
// tokens, then to the nucleus top_p of those (the smallest set of most probable tokens whose mass
// reaches top_p of theirs; 1 = all), then to the tokens of at least min_p x the top probability
// (the order of the CPU sampler's filters), with the uniform number u (inverse CDF over the kept
// tokens in descending-probability order, ties to the lower id).
// T <= 0 means greedy (argmax). Writes out[b] and, when `entropy` is not null, the row's entropy
// at temperature 1 (the bits logits_entropy_argmax gives). No sort: a radix search over the
// probability bits with exact fixed-point sums (see ops_sample.cu). u >= 1 or NaN inputs give
// some valid id, never a crash. `workspace` must hold sample_workspace_bytes(B, V) bytes (a
// candidate list per row: B * V * 8, plus histograms).
size_t sample_workspace_bytes(int B, int V);
void sample(const float* logits, int B, int V, const SampleRow* rows, SampleRule rule, int32_t* out, float* entropy,
            void* workspace, cudaStream_t stream);

// nll[t] = -log softmax(logits[t])[target[t]] for FP32 logits [T, V] (perplexity on the device);
// NaN for a target outside [0, V).
void token_nll(const float* logits, int T, int V, const int32_t* target, float* nll, cudaStream_t stream);

}  // namespace nibble::cuda::ops

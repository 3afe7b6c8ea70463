// Batch: allocation of the KV cache and scratch (checked against free device memory), the RoPE
// table, argument checks shared by prefill and decode.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "model/cuda/batch_impl.h"
#include "model/ops.h"
#include "nibble/cuda/ops.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

constexpr size_t kMiB = size_t(1) << 20;
// Left free for cuBLAS / the GEMM workspaces and the CUDA context's own growth.
constexpr size_t kMemoryMargin = 512 * kMiB;

size_t free_device_bytes() {
  size_t free = 0, total = 0;
  NIBBLE_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

// The RoPE table as the CPU Session builds it (double angles, stored as float).
std::vector<float> rope_table(const ModelConfig& c, int max_ctx) {
  const int d = c.head_dim;
  const std::vector<double> inv = ::nibble::ops::rope_inv_freq(c);
  std::vector<float> t(size_t(max_ctx) * d);
  for (int p = 0; p < max_ctx; ++p)
    for (int i = 0; i < d / 2; ++i) {
      const double a = double(p) * inv[size_t(i)];
      t[size_t(p) * d + i] = float(std::cos(a));
      t[size_t(p) * d + d / 2 + i] = float(std::sin(a));
    }
  return t;
}

int resolve_context(const ModelConfig& c, int max_context) {
  const int ctx = max_context > 0 ? max_context : c.max_positions;
  if (max_context < 0 || ctx <= 0)
    throw Error(fmt::format("Batch: max_context must be positive, got {}", max_context));
  return ctx;
}

// One layer's KV cache: K then V codes, then (E4M3) the K and V scales, each region 16-byte
// aligned.
struct KvLayout {
  size_t codes = 0, scales = 0;  // bytes of one region of each
  size_t layer() const { return 2 * (codes + scales); }
};
size_t round16(size_t n) { return (n + 15) / 16 * 16; }
KvLayout kv_layout(const ModelConfig& c, int max_batch, int max_context, ops::KvType type) {
  const size_t rows = size_t(max_batch) * size_t(c.num_kv_heads) * size_t(max_context);
  const size_t row_bytes = ops::kv_row_bytes(type, c.head_dim);
  if (type == ops::KvType::fp16) return {round16(rows * row_bytes), 0};
  return {round16(rows * size_t(c.head_dim)), round16(rows * (row_bytes - size_t(c.head_dim)))};
}

// Columns of the widest stacked output (q/k/v or gate/up run as one FP16 matrix).
size_t stack_width(const ModelConfig& c) {
  const size_t qkv = size_t(c.num_heads + 2 * c.num_kv_heads) * size_t(c.head_dim);
  return std::max(qkv, 2 * size_t(c.intermediate_size));
}

}  // namespace

size_t scratch_bytes(const DeviceModel::Impl& m, int rows) {
  const ModelConfig& c = *m.cfg;
  const size_t H = size_t(c.hidden_size), I = size_t(c.intermediate_size), V = size_t(m.vocab);
  const size_t qd = size_t(c.num_heads) * c.head_dim, kd = size_t(c.num_kv_heads) * c.head_dim;
  const size_t per_row = 4 * H + 2 * (3 * H + 2 * qd + 2 * kd + 2 * I + stack_width(c)) + 4 * V +
                         (m.head_quantized ? 2 * V : 0) + 10 * 4;
  return size_t(rows) * per_row;
}

ops::KvType kv_type(const std::string& kv_cache) {
  if (kv_cache.empty() || kv_cache == "fp16") return ops::KvType::fp16;
  if (kv_cache == "fp8-e4m3") return ops::KvType::e4m3;
  throw Error(fmt::format("--device cuda: KV-cache format '{}' is not held on the GPU (fp16 or fp8-e4m3; the CPU "
                          "takes any format: --device cpu)",
                          kv_cache));
}

size_t Batch::kv_cache_bytes(const ModelConfig& c, int max_batch, int max_context, ops::KvType type) {
  return size_t(c.num_layers) * kv_layout(c, max_batch, max_context, type).layer();
}

int Batch::max_batch_that_fits(const DeviceModel& dm, int max_context, ops::KvType kv) {
  const DeviceModel::Impl& m = dm.impl();
  const int ctx = resolve_context(*m.cfg, max_context);
  const size_t free = free_device_bytes();
  const size_t fixed = kMemoryMargin + scratch_bytes(m, kPrefillChunk) + size_t(ctx) * m.cfg->head_dim * 4;
  if (free <= fixed) return 0;
  const size_t per_slot = kv_cache_bytes(*m.cfg, 1, ctx, kv) + scratch_bytes(m, 1);
  return int(std::min<size_t>((free - fixed) / per_slot, 1 << 20));
}

Batch::Impl::Impl(const DeviceModel::Impl& dm, const BatchOptions& opt)
    : m(dm), c(*dm.cfg), max_batch(opt.max_batch), max_ctx(resolve_context(*dm.cfg, opt.max_context)),
      max_rows(std::max(kPrefillChunk, opt.max_batch)), use_graphs(opt.cuda_graphs), kv_type(opt.kv) {
  if (max_batch < 1) throw Error(fmt::format("Batch: max_batch must be at least 1, got {}", max_batch));
  const int H = c.hidden_size, I = c.intermediate_size, d = c.head_dim;
  const size_t qd = size_t(c.num_heads) * d, kd = size_t(c.num_kv_heads) * d, V = size_t(m.vocab);
  const size_t rows = size_t(max_rows);
  const size_t cache = kv_cache_bytes(c, max_batch, max_ctx, kv_type);
  const size_t attn = ops::attention_decode_workspace_bytes(max_batch, c.num_heads, d, max_ctx);
  const size_t samp = std::max(ops::sample_workspace_bytes(max_batch, int(V)), ops::entropy_workspace_bytes(max_batch, int(V)));
  const size_t need = cache + scratch_bytes(m, max_rows) + attn + samp + size_t(max_ctx) * d * 4;
  const size_t free = free_device_bytes();
  if (need + kMemoryMargin > free)
    throw Error(fmt::format("--device cuda: a batch of {} sequences x {} tokens needs {} bytes on the GPU "
                            "({} for the {} KV cache, the rest scratch) plus a {} MiB margin, but only {} bytes "
                            "are free; lower the batch size or the context{}",
                            max_batch, max_ctx, need, cache, kv_type == ops::KvType::e4m3 ? "E4M3" : "FP16",
                            kMemoryMargin / kMiB, free,
                            kv_type == ops::KvType::fp16 ? " (--kv-cache fp8-e4m3 halves the cache)" : ""));
  kv = DeviceBuffer<uint8_t>(cache);
  rope = DeviceBuffer<float>(rope_table(c, max_ctx));
  const char* fuse_rope = std::getenv("NIBBLE_FUSE_ROPE");  // for comparisons
  fuse_rope_store = !(fuse_rope && std::string_view(fuse_rope) == "0");
  x = DeviceBuffer<float>(rows * H);
  xn = DeviceBuffer<uint16_t>(rows * H);
  tmp = DeviceBuffer<uint16_t>(rows * H);
  o_out = DeviceBuffer<uint16_t>(size_t(max_batch) * H);
  q = DeviceBuffer<uint16_t>(rows * qd);
  att = DeviceBuffer<uint16_t>(rows * qd);
  k = DeviceBuffer<uint16_t>(rows * kd);
  v = DeviceBuffer<uint16_t>(rows * kd);
  gate = DeviceBuffer<uint16_t>(rows * I);
  up = DeviceBuffer<uint16_t>(rows * I);
  stack_out = DeviceBuffer<uint16_t>(rows * stack_width(c));
  logits = DeviceBuffer<float>(rows * V);
  if (m.head_quantized) logits16 = DeviceBuffer<uint16_t>(rows * V);
  rows_h = PinnedBuffer<int32_t>(3 * rows);
  std::fill_n(rows_h.get(), 3 * rows, 0);
  rows_d = DeviceBuffer<int32_t>(3 * rows);
  ids = rows_d.get(), slot = ids + rows, pos = slot + rows;
  targets = DeviceBuffer<int32_t>(rows);
  sampled = DeviceBuffer<int32_t>(rows);
  nll = DeviceBuffer<float>(rows);
  entropy = DeviceBuffer<float>(rows);
  sample_h = PinnedBuffer<ops::SampleRow>(rows);
  sample_d = DeviceBuffer<ops::SampleRow>(rows);
  sampled_h = PinnedBuffer<int32_t>(rows);
  entropy_h = PinnedBuffer<float>(rows);
  attn_ws = DeviceBuffer<uint8_t>(std::max<size_t>(attn, 1));
  NIBBLE_CUDA_CHECK(cudaMemset(attn_ws.get(), 0, attn_ws.bytes()));  // decode attention's chunk counters
  logits_ws = DeviceBuffer<uint8_t>(std::max<size_t>(samp, 1));
  positions.assign(size_t(max_batch), 0);
  decode_stack_why = DecodeStack::unsupported(m, kv_type);
  const char* stack_env = std::getenv("NIBBLE_DECODE_STACK");  // experimental (slower today): 1 turns it on
  if (stack_env && std::string_view(stack_env) == "1") enable_decode_stack(0);
  // last, so that a failed allocation above leaks neither (the destructor does not run then)
  NIBBLE_CUDA_CHECK(cudaEventCreateWithFlags(&rows_copied, cudaEventDisableTiming));
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
}

Batch::Impl::~Impl() {
  graphs.clear();
  if (stream) cudaStreamSynchronize(stream);
  if (rows_copied) cudaEventDestroy(rows_copied);
  if (stream) cudaStreamDestroy(stream);
}

void Batch::Impl::enable_decode_stack(int ctas) {
  use_decode_stack = true;
  if (!decode_stack_why.empty()) return;
  if (!decode_stack) {
    std::vector<ops::KvCache> caches;
    for (size_t l = 0; l < m.layers.size(); ++l) caches.push_back(kv_cache(int(l)));
    decode_stack.emplace(m, caches, StackBuffers{x.get(), q.get(), att.get(), gate.get(), rope.get(), pos, slot});
  }
  decode_stack->set_ctas(ctas);
}

ops::KvCache Batch::Impl::kv_cache(int layer) const {
  const KvLayout l = kv_layout(c, max_batch, max_ctx, kv_type);
  uint8_t* base = kv.get() + size_t(layer) * l.layer();
  ops::KvCache cache{kv_type, base, base + l.codes, nullptr, nullptr, max_ctx};
  if (kv_type == ops::KvType::e4m3) {
    cache.k_scale = reinterpret_cast<float*>(base + 2 * l.codes);
    cache.v_scale = reinterpret_cast<float*>(base + 2 * l.codes + l.scales);
  }
  return cache;
}

void Batch::Impl::check_slot(int s, const char* what) const {
  if (s < 0 || s >= max_batch)
    throw Error(fmt::format("{}: slot {} is outside the batch [0, {})", what, s, max_batch));
}

void Batch::Impl::check_tokens(std::span<const int32_t> tokens, const char* what) const {
  const int64_t V = m.model->weights().embed.rows;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      throw Error(fmt::format("{}: token id {} at index {} is outside the vocabulary [0, {})", what, tokens[i], i, V));
}

void Batch::Impl::upload_rows(std::span<const int32_t> ids_h, std::span<const int32_t> slot_h,
                              std::span<const int32_t> pos_h) {
  const size_t rows = size_t(max_rows);
  NIBBLE_CUDA_CHECK(cudaEventSynchronize(rows_copied));
  int32_t* h = rows_h.get();
  std::copy(ids_h.begin(), ids_h.end(), h);
  std::copy(slot_h.begin(), slot_h.end(), h + rows);
  std::copy(pos_h.begin(), pos_h.end(), h + 2 * rows);
  // one transfer of the whole [3][rows] block (the unused tail rows are never read)
  NIBBLE_CUDA_CHECK(cudaMemcpyAsync(rows_d.get(), h, 3 * rows * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  NIBBLE_CUDA_CHECK(cudaEventRecord(rows_copied, stream));
}

void Batch::Impl::copy_to_host(void* dst, const void* src, size_t bytes) const {
  NIBBLE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

Batch::Batch(const DeviceModel& dm, const BatchOptions& opt) : p_(std::make_unique<Impl>(dm.impl(), opt)) {}
Batch::~Batch() = default;

void Batch::reset(int slot) {
  p_->check_slot(slot, "Batch::reset");
  p_->positions[size_t(slot)] = 0;
}
int Batch::position(int slot) const {
  p_->check_slot(slot, "Batch::position");
  return p_->positions[size_t(slot)];
}
int Batch::max_batch() const { return p_->max_batch; }
int Batch::max_context() const { return p_->max_ctx; }
cudaStream_t Batch::stream() const { return p_->stream; }

}  // namespace nibble::cuda

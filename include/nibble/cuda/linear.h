#pragma once
// The CUDA linear layer for decode: Y[M, N] = X[M, K] · W[N, K]^T with M in 1..16 activation rows
// (tokens), fp16 activations, weights in any supported low-bit format, FP32 accumulation.
//
// A DeviceWeight is an offline repack of a PackedTensor (the serialized layout of
// ../shared/FORMATS.md) into the private layout of the kernel that will read it, uploaded once.
// linear() then picks a kernel by format, M and shape (see docs/kernels.md).
// Built only when nvcc is found (NIBBLE_HAVE_CUDA); the header itself needs only the CUDA runtime.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/cuda/weight_kind.h"
#include "nibble/format.h"

namespace nibble::cuda {

// How the nvfp4 / nvfp4-razer CUDA-core kernels turn FP4 codes into numbers (other formats have
// one decoder).
enum class Fp4Decode { automatic, bits, lut };
// Which units multiply: CUDA cores (FP32 FMA, every format) or tensor cores (mma.sync on decoded
// fp16 weights, FP32 accumulation; every format but razer-fp3-g128 and fp16, K a multiple of 64).
// tensor_stream: the tensor-core kernel as a persistent grid fed by bulk asynchronous copies into a
// shared-memory ring, X held in shared memory (sm_90; every format with a tile layout, M <= 16,
// where X [M, K] fits beside the ring: stream_kernel_fits); docs/kernels.md.
enum class Engine { automatic, cuda_cores, tensor_cores, tensor_stream };

// A weight on the device, in its kernel's layout. Owns its device memory; movable, not copyable.
class DeviceWeight {
 public:
  DeviceWeight() = default;
  DeviceWeight(DeviceWeight&& o) noexcept;
  DeviceWeight& operator=(DeviceWeight&& o) noexcept;
  DeviceWeight(const DeviceWeight&) = delete;
  DeviceWeight& operator=(const DeviceWeight&) = delete;
  ~DeviceWeight();

  WeightKind kind = WeightKind::nvfp4;
  std::string format;           // registry name
  int64_t N = 0, K = 0;         // W is [N, K]
  int block = 0;                // group size along K
  float global_scale = 1.0f;
  float sv_a = 0.0f, sv_b = 0.0f;
  void* qweight = nullptr;      // element codes, kernel layout
  void* scales = nullptr;       // per-group scales (native width), kernel layout
  void* aux = nullptr;          // second metadata plane (int4 zero points), or null
  // The codes again in the tensor-core tile layout (null: no such path); NVFP4 formats interleave
  // their block scales with the codes there, MXFP4 its scales as fp16 exponents relative to the
  // tensor's largest (only when its nonzero blocks' scales span at most 2^24; otherwise it has no
  // tile layout and runs on CUDA cores at every M).
  void* qweight_mma = nullptr;
  // The FP32-scaled formats' per-group metadata again, block-major [N / 16][groups][16] for the
  // tile kernels (repack_block_major); null for the others.
  void* scales_mma = nullptr;
  float mma_out_factor = 1.0f;  // the tile layout's output scale over global_scale (MXFP4)
  size_t qweight_bytes = 0, scales_bytes = 0, aux_bytes = 0;
  size_t mma_bytes = 0;  // qweight_mma and scales_mma
  // A stack (upload_stacked): rows and global scale of each part, in order; empty for one weight.
  std::vector<int64_t> part_rows;
  std::vector<float> part_scales;
  bool silu_pairs = false;  // a gate/up stack with interleaved rows whose output is silu(gate) * up
  // A q/k/v stack whose q and k rows are in RoPE pair order for heads of this many rows (0: as
  // given): rows 2j and 2j + 1 of a head are its rows j and j + d/2, so that one lane holds both
  // outputs of a pair (linear_rope_store). linear() still writes every output in place.
  int rope_head_dim = 0;

  // Bytes one GEMV must read from device memory for this weight (its storage cost).
  size_t bytes() const { return qweight_bytes + scales_bytes + aux_bytes; }

 private:
  void release() noexcept;
};

// True when `format` (a registry name) has a GEMV kernel here.
bool has_kernel(std::string_view format);
// Formats with a GEMV kernel, in registry names.
std::vector<std::string> kernel_formats();

// Repacks t (serialized layout) into the kernel layouts and uploads it: the row-major layout of the
// CUDA-core kernels, plus the tile layout of the tensor-core kernels where the format has one and
// K is a multiple of 64 (the codes are then held twice). Throws nibble::Error naming the tensor
// and field when the format has no kernel or the shape is not supported (K must be a multiple of
// the group size and of 32; fp16: of 8).
DeviceWeight upload(const PackedTensor& t, std::string_view name = "weight");

// Weights of one format and K stacked along N (2 or 3: q/k/v, gate/up) into one DeviceWeight, so
// that one launch computes them all (the multi-output linear() below): small-N parts no longer run
// as launches too small to fill the GPU. Each part keeps its own global scale; the RaZeR special
// values must agree. Throws nibble::Error like upload(), naming the part at fault.
// rope_head_dim > 0 (three parts: q, k, v, each a whole number of heads of that many rows):
// q's and k's rows are held in RoPE pair order (DeviceWeight::rope_head_dim).
DeviceWeight upload_stacked(const std::vector<const PackedTensor*>& parts, std::string_view name = "weights",
                            int rope_head_dim = 0);
// gate and up (same shape) with their rows interleaved: linear() on it writes one output,
// silu(gate) * up ([M, rows of gate]), each of gate and up rounded to fp16 first, as the separate
// GEMV then ops::silu_mul would compute it: the SwiGLU activation fused into the GEMV.
DeviceWeight upload_silu_pair(const PackedTensor& gate, const PackedTensor& up, std::string_view name = "gate_up");

struct LinearOptions {
  Fp4Decode fp4_decode = Fp4Decode::automatic;
  int rows_per_warp = 0;  // CUDA cores: 0 lets the dispatcher / tuning table choose (2 or 4)
  // Parts of K for the same rows (1, 2, 4, 8; 0: dispatcher / table), the SM-count knob of the
  // down projections: more splits mean more CTAs for a given N. CUDA cores: warps of a CTA.
  // Tensor cores: CTAs of a cluster, adding up through distributed shared memory (sm_90 only;
  // elsewhere a split > 1 is refused). The stream kernel ignores it.
  int k_splits = 0;
  Engine engine = Engine::automatic;
  // Tensor cores and tensor_stream: 16-row blocks per CTA (1, 2, 4: more blocks read X fewer
  // times, but launch fewer CTAs). 0: dispatcher / tuning table.
  int row_blocks = 0;
};

// Y = X · W^T. x: [M, K] fp16 (row-major, bits as uint16), y: [M, N] fp16, both on the device.
// M in 1..16. Asynchronous on `stream`; throws nibble::Error on bad arguments or launch failure.
void linear(const uint16_t* x, int M, const DeviceWeight& w, uint16_t* y, cudaStream_t stream,
            const LinearOptions& opt = {});
// The same for a stack: ys[i] ([M, rows of part i]) receives part i's outputs. One weight and a
// silu pair take one output.
void linear(const uint16_t* x, int M, const DeviceWeight& w, const std::vector<uint16_t*>& ys, cudaStream_t stream,
            const LinearOptions& opt = {});

// An add + RMSNorm in front of a linear (a decode step's FFN input): X [M, K] = fp16(rmsnorm(res +
// float(delta)) * w), the bits of ops::rmsnorm_of_sum; res is not written.
struct RmsNormInput {
  const float* res = nullptr;       // FP32 [M, K] (the residual stream)
  const uint16_t* delta = nullptr;  // FP16 [M, K] (the output of the layer before)
  const float* w = nullptr;         // FP32 [K]
  float eps = 0.0f;
  uint16_t* xn = nullptr;           // FP16 [M, K] scratch: receives X where the GEMV does not compute it
};
// linear() on that X: where linear_fuses_rmsnorm() says so, the GEMV computes X itself (one kernel
// instead of two); else ops::rmsnorm_of_sum writes it to in.xn first. res and w are read before the
// programmatic-dependent-launch wait, so the kernel just before must not write them (as with
// ops::add_rmsnorm).
void linear_rmsnorm(const RmsNormInput& in, int M, const DeviceWeight& w, const std::vector<uint16_t*>& ys,
                    cudaStream_t stream, const LinearOptions& opt = {});
// linear() on a q/k/v stack in RoPE pair order (upload_stacked with rope_head_dim d), each token's
// q and k then rotated and stored as ops::qk_norm_rope_store (without q/k norms) stores them, in
// the same kernel: q [M, rows of q] receives RoPE(q); RoPE(k) and v go straight into the FP16 KV
// cache at row (slot[m] * nkv + head) * max_ctx + pos[m] (a token whose slot or position is out
// of range writes nothing). The same bits as linear() then ops::qk_norm_rope_store.
struct RopeStore {
  const float* cos_sin = nullptr;  // FP32 [max_ctx][d]: d/2 cosines, then d/2 sines per position
  const int32_t* slot = nullptr;   // [M] on the device
  const int32_t* pos = nullptr;    // [M] on the device
  uint16_t* k_cache = nullptr;     // FP16 [slots][nkv][max_ctx][d], 16-byte aligned
  uint16_t* v_cache = nullptr;
  int max_ctx = 0;
};
void linear_rope_store(const uint16_t* x, int M, const DeviceWeight& w, uint16_t* yq, const RopeStore& rope,
                       cudaStream_t stream, const LinearOptions& opt = {});

// Whether linear_rmsnorm() computes the norm inside the GEMV for w at M rows: the persistent one-row
// CUDA-core GEMV of the formats that norm_fused_kind (src/kernels/cuda/gemv_args.h) lists, where
// it measured faster (mxfp4 and int4-g128 as of 2026-11-29), K <= 4096, one K split.
bool linear_fuses_rmsnorm(const DeviceWeight& w, int M, const LinearOptions& opt = {});

// y = x · W^T for one row x [K] and a plain row-major FP16 W [N, K] held by the caller (an output
// layer, or the embedding table it is tied to), FP32 y [N]: the FP16 GEMV of linear() with FP32
// outputs (K a multiple of 8; x, W 16-byte aligned). At one row it reads W faster than cuBLAS.
void linear_fp16_f32out(const uint16_t* x, const uint16_t* w, int64_t N, int64_t K, float* y, cudaStream_t stream);

// Whether linear() can split K over a cluster of CTAs on tensor cores (k_splits > 1): sm_90.
bool tensor_core_splits_supported();

// Whether linear() can run w at M rows on Engine::tensor_stream with row_blocks (1 or 2) 16-row
// blocks per unit: a tile layout, M <= 16, shared memory for X and the ring, and an sm_90 device.
bool stream_kernel_fits(const DeviceWeight& w, int M, int row_blocks);

// NF4 dequantization to fp16 [N, K] (paper 003): the branch-tree baseline and the shared-memory
// lookup-table kernel. Bit-identical outputs. w must be an nf4 DeviceWeight.
enum class Nf4Dequant { branch_tree, shared_lut };
void nf4_dequantize(const DeviceWeight& w, uint16_t* out, Nf4Dequant which, cudaStream_t stream);

}  // namespace nibble::cuda

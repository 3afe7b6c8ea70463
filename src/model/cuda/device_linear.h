#pragma once
// DeviceLinear: one linear layer on the device for any row count M (see nibble/cuda/runtime.h).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "model/cuda/device_buffer.h"
#include "nibble/cuda/crossover.h"
#include "nibble/cuda/cublas_fp16.h"
#include "nibble/cuda/gemm.h"
#include "nibble/cuda/linear.h"
#include "nibble/format.h"

namespace nibble::cuda {

// What a linear needs to run on one stream (each Batch owns one set).
struct LinearExec {
  cudaStream_t stream = nullptr;
  GemmWorkspace* gemm_ws = nullptr;
  CublasFp16* cublas = nullptr;
  uint16_t* stack_out = nullptr;  // [rows, widest stack]: a stacked FP16 linear's output before its split
};

class DeviceLinear {
 public:
  // gemv: few rows; gemm: the fused tensor-core GEMM; dequant_cublas: many rows, the weight
  // dequantized to fp16 (into the GEMM workspace) then cuBLAS; fp16: held as fp16 for cuBLAS.
  enum class Path { gemv, gemm, dequant_cublas, fp16 };

  // Plain float weights (fp16, bf16, fp32: held as FP16) run the FP16 GEMV up to this many rows,
  // cuBLAS above: on the H100 the GEMV is 4-16% faster than cuBLAS at one row on the Llama-3.1-8B
  // shapes and 5-22% slower at two (docs/perf/kernels-2026-11-23.md).
  static constexpr int kFp16GemvMaxRows = 1;

  // Uploads w [N, K] (and an FP32 bias [N], or none) in every layout it will run from: the GEMV
  // layout where the format has a GEMV kernel for this shape, the GEMM layout where it has a GEMM
  // kernel; FP16 (dequantized on the host) for cuBLAS when it has neither. A plain float weight is
  // held once as FP16 in the GEMV layout (row-major), which cuBLAS reads too. `name` is named in
  // errors and in fp16_reason(). `held`: here, or by the layer in a stack with its neighbours
  // (DeviceLayer): the GEMV layout only (run() then refuses the GEMV path; a plain float weight
  // then has no other layout, and run() refuses every path).
  enum class Held { here, gemv_in_layer };
  DeviceLinear(const PackedTensor& w, std::span<const float> bias, std::string name, Held held = Held::here);

  // y[M, N] = x[M, K] · W^T (+ bias), FP16 on the device, asynchronous on ex.stream.
  void run(const uint16_t* x, int M, uint16_t* y, const LinearExec& ex) const;

  Path path_for(int M) const;
  // The FP16 [N, K] weight cuBLAS reads (its own copy, or the FP16 GEMV layout); null when none.
  const uint16_t* fp16_weight() const;
  // y[M, N] += bias (nothing without one): for outputs a stacked GEMV wrote.
  void add_bias(uint16_t* y, int M, cudaStream_t stream) const;
  // Its own GEMV layout (null where it has none, or where its layer holds it in a stack).
  const DeviceWeight* gemv_weight() const { return gemv_ ? &*gemv_ : nullptr; }
  bool has_bias() const { return !bias_.empty(); }
  const std::string& name() const { return name_; }
  const std::string& format() const { return format_; }
  int64_t rows() const { return N_; }
  int64_t cols() const { return K_; }
  // Why this layer runs dequantized to FP16 (empty when a kernel reads it packed, or when the
  // format is a plain float format that is meant to run through cuBLAS).
  const std::string& fp16_reason() const { return fp16_reason_; }
  // Weight bytes one decode step (M <= the crossover) reads, bias included.
  size_t decode_bytes() const;
  // Device bytes held (both packed layouts count: the codes are held twice where both exist).
  size_t device_bytes() const;

 private:
  std::string name_, format_;
  int64_t N_ = 0, K_ = 0;
  Crossover crossover_;  // where the paths switch (nibble/cuda/crossover.h)
  std::optional<DeviceWeight> gemv_;
  Held held_ = Held::here;
  std::optional<GemmWeight> gemm_;
  DeviceBuffer<uint16_t> fp16_;
  DeviceBuffer<float> bias_;
  std::string fp16_reason_;
};

}  // namespace nibble::cuda

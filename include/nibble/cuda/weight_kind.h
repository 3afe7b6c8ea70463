#pragma once
// The weight formats that have a CUDA GEMV kernel (linear.h), on its own so that the kernels'
// headers can name them without the host API.
namespace nibble::cuda {

// fp16: plain FP16 weights on CUDA cores only (the runtime takes cuBLAS above a few rows,
// DeviceLinear).
enum class WeightKind { nvfp4, nvfp4_razer, mxfp4, fp4_g128, razer_fp4_g128, razer_fp3_g128, int4_g128, nf4, fp16 };

}  // namespace nibble::cuda

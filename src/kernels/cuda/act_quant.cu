// W4A4 on Hopper, which has no FP4 tensor cores: the activations are quantized per token on the
// GPU to NVFP4 or NVFP4-RaZeR-activation codes exactly as the CPU format library does (same
// float64 decisions: E4M3 block scale, FP4 rounding, special-value sign by squared error summed in
// sum4 order), then written back as fp16 code * block scale, which is exact in fp16; the row's
// FP32 global scale goes to the GEMM epilogue. So the W4A4 GEMM is the W4A16 kernel on
// already-quantized activations (FP4 x E4M3 products exact; FP32 accumulation).
#include <cuda_fp16.h>

#include <string>

#include "gemm_kernels.cuh"
#include "nibble/cuda/check.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"

namespace nibble::cuda {
namespace {

constexpr int kBlock = 16;
constexpr int kThreads = 256;

// Nearest E4M3 code of a >= 0, ties to even, saturating at 0x7E (448): the CPU's minifloat_code.
__device__ uint32_t e4m3_code(double a) {
  constexpr int emin = -6;
  const uint64_t bits = uint64_t(__double_as_longlong(a));
  const int e = int(bits >> 52) - 1023;
  uint32_t code;
  if (e < emin) {
    code = uint32_t(rint(a * 512.0));  // subnormal: a / 2^-9
  } else {
    const uint64_t mant = bits & ((uint64_t(1) << 52) - 1), half = uint64_t(1) << 48;
    code = (uint32_t(e - emin + 1) << 3) | uint32_t(mant >> 49);
    const uint64_t rem = mant & ((uint64_t(1) << 49) - 1);
    code += (rem > half || (rem == half && (code & 1))) ? 1u : 0u;
  }
  return code > 0x7Eu ? 0x7Eu : code;
}

__device__ float e4m3_value(uint32_t c) {
  const int e = (c >> 3) & 0xF, m = c & 7;
  return e == 0 ? ldexpf(m / 8.0f, -6) : ldexpf(1.0f + m / 8.0f, e - 7);
}

__device__ __constant__ float kFp4[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// OCP rounding (ties to even); the sign from r's sign bit.
__device__ uint32_t fp4_code_even(double r) {
  const double a = fabs(r);
  const uint32_t i = (a > 0.25) + (a >= 0.75) + (a > 1.25) + (a >= 1.75) + (a > 2.5) + (a >= 3.5) + (a > 5.0);
  return i | (signbit(r) ? 8u : 0u);
}

// RaZeR element rule: nearest of the FP4 levels (ties to the smaller magnitude, zero is code 0)
// and sv (code 8); returns the code and its value.
__device__ uint32_t razer_code(double r, double sv, double* value) {
  const double a = fabs(r);
  const uint32_t i = (a > 0.25) + (a > 0.75) + (a > 1.25) + (a > 1.75) + (a > 2.5) + (a > 3.5) + (a > 5.0);
  const bool neg = r < 0 && i > 0;
  const double v = neg ? -double(kFp4[i]) : double(kFp4[i]);
  const uint32_t code = i | (neg ? 8u : 0u);
  bool special;
  if (sv == v) {
    special = 8u < code;
  } else {
    const double mid = (v + sv) * 0.5;
    special = r == mid ? fabs(sv) < fabs(v) : (sv > v ? r > mid : r < mid);
  }
  *value = special ? sv : v;
  return special ? 8u : code;
}

// Squared error of a block at step with special value sv, summed as the CPU's sum4: four running
// sums over i mod 4, combined (s0 + s1) + (s2 + s3). Also returns the values (times nothing).
__device__ double razer_block(const float* x, double step, double sv, float* vals) {
  double s[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < kBlock; ++i) {
    double v = 0;
    if (step != 0.0) razer_code(double(x[i]) / step, sv, &v);
    vals[i] = float(v);
    const double d = double(x[i]) - v * step;
    s[i & 3] += d * d;
  }
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// One CTA per row: the row's amax (exact in any order), gs, then one thread per block of 16.
template <bool kRazer>
__global__ void quantize_rows_kernel(const __half* x, int K, float sv_mag, __half* xq, float* row_scale) {
  const __half* row = x + int64_t(blockIdx.x) * K;
  __half* out = xq + int64_t(blockIdx.x) * K;
  float amax = 0;
  for (int k = threadIdx.x; k < K; k += kThreads) amax = fmaxf(amax, fabsf(__half2float(row[k])));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  __shared__ float warp_max[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = 0;
  for (int w = 0; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  float gs = amax / (448.0f * 6.0f);
  if (gs == 0.0f) gs = 1.0f;
  if (threadIdx.x == 0) row_scale[blockIdx.x] = gs;

  for (int b = threadIdx.x; b < K / kBlock; b += kThreads) {
    float xb[kBlock], vals[kBlock];
    float bmax = 0;
#pragma unroll
    for (int i = 0; i < kBlock; ++i) xb[i] = __half2float(row[b * kBlock + i]), bmax = fmaxf(bmax, fabsf(xb[i]));
    const uint32_t sc = e4m3_code(double(bmax) / (double(gs) * 6.0));
    const float s = e4m3_value(sc);
    const double step = double(gs) * double(s);
    if constexpr (kRazer) {
      float minus[kBlock];
      const double err_plus = razer_block(xb, step, double(sv_mag), vals);
      if (razer_block(xb, step, -double(sv_mag), minus) < err_plus)
        for (int i = 0; i < kBlock; ++i) vals[i] = minus[i];
    } else {
#pragma unroll
      for (int i = 0; i < kBlock; ++i) {
        const uint32_t c = step == 0.0 ? 0u : fp4_code_even(double(xb[i]) / step);
        vals[i] = (c & 8u) ? -kFp4[c & 7] : kFp4[c & 7];
      }
    }
    // value * s is exact in fp16 (a few significant bits, within 2^-10 .. 2^12)
    alignas(16) __half h[kBlock];
#pragma unroll
    for (int i = 0; i < kBlock; ++i) h[i] = __float2half_rn(vals[i] * s);
    reinterpret_cast<uint4*>(out + b * kBlock)[0] = reinterpret_cast<const uint4*>(h)[0];
    reinterpret_cast<uint4*>(out + b * kBlock)[1] = reinterpret_cast<const uint4*>(h)[1];
  }
}

}  // namespace

bool is_w4a4_act_format(std::string_view f) { return f == "nvfp4" || f == "nvfp4-razer-act"; }

void quantize_rows_nvfp4(const uint16_t* x, int M, int K, std::string_view act_format, float sv, uint16_t* xq,
                         float* row_scale, cudaStream_t stream) {
  if (!is_w4a4_act_format(act_format))
    throw Error("quantize_rows_nvfp4: activation format '" + std::string(act_format) +
                "' has no GPU quantizer (nvfp4, nvfp4-razer-act)");
  if (M < 1 || K < kBlock || K % kBlock != 0)
    throw Error("quantize_rows_nvfp4: K = " + std::to_string(K) + " must be a positive multiple of 16 (M = " +
                std::to_string(M) + ")");
  const auto* xi = reinterpret_cast<const __half*>(x);
  auto* xo = reinterpret_cast<__half*>(xq);
  if (act_format == "nvfp4")
    quantize_rows_kernel<false><<<M, kThreads, 0, stream>>>(xi, K, 0.0f, xo, row_scale);
  else
    quantize_rows_kernel<true><<<M, kThreads, 0, stream>>>(xi, K, sv, xo, row_scale);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nibble::cuda

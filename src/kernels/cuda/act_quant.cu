// W4A4 on Hopper, which has no FP4 tensor cores: the activations are quantized per token on the
// GPU to NVFP4 or NVFP4-RaZeR-activation codes exactly as the CPU format library does (same
// float64 decisions: E4M3 block scale, FP4 rounding, special-value sign by squared error summed in
// sum4 order), then written back as fp16 code * block scale, which is exact in fp16; the row's
// FP32 global scale goes to the GEMM epilogue. So the W4A4 GEMM is the W4A16 kernel on
// already-quantized activations (FP4 x E4M3 products exact; FP32 accumulation).
#include <cuda_fp16.h>

#include <string>

#include "decode.cuh"
#include "e4m3.cuh"
#include "gemm_kernels.cuh"
#include "nibble/cuda/check.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"
#include "reduce.cuh"

namespace nibble::cuda {
namespace {

constexpr int kBlock = 16;
constexpr int kThreads = 256;
constexpr int kMaxK = kThreads * 16 * kBlock;  // a row's blocks in registers, at most 16 per thread

// RaZeR element rule: nearest of the FP4 levels (ties to the smaller magnitude, zero is code 0)
// and sv (code 8); returns the code and its value.
__device__ uint32_t razer_code(double r, double sv, double* value) {
  const double a = fabs(r);
  const uint32_t i = (a > 0.25) + (a > 0.75) + (a > 1.25) + (a > 1.75) + (a > 2.5) + (a > 3.5) + (a > 5.0);
  const bool neg = r < 0 && i > 0;
  const double v = neg ? -double(detail::fp4_value(int(i))) : double(detail::fp4_value(int(i)));
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

// OCP FP4 rounding (ties to even) of |x| / step, as the CPU library decides it in float64 (level
// i when |x| / step passes thresholds 0.25, 0.75, ...), without dividing: |x| / step > t exactly
// when |x| > t * step (x has 11 significant bits and t * step at most 31, exact in double, so the
// double quotient cannot round onto a threshold t), and for a float a, a > T exactly when
// a > RD(T) (a >= T when a >= RU(T)).
struct Fp4Thresholds {
  float t[7];
  __device__ explicit Fp4Thresholds(double step) {
    constexpr double kT[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};  // > >= > >= > >= >
#pragma unroll
    for (int j = 0; j < 7; ++j) t[j] = j % 2 ? __double2float_ru(kT[j] * step) : __double2float_rd(kT[j] * step);
  }
};

// The same thresholds in fp16, for fp16 inputs: RD / RU to fp16 of the float thresholds, which are
// RD / RU of the exact ones, so a > t (a >= t) decides as before for every fp16 a. Seven fp16
// comparisons, two elements per instruction.
struct Fp4HalfThresholds {
  __half2 t[7];
  __device__ explicit Fp4HalfThresholds(const Fp4Thresholds& f) {
#pragma unroll
    for (int j = 0; j < 7; ++j) t[j] = __half2half2(j % 2 ? __float2half_ru(f.t[j]) : __float2half_rd(f.t[j]));
  }
};

// NVFP4 codes of two fp16 elements x at block scale s (fp16, exact), written back as fp16 value * s
// with x's sign. The FP4 index is the count of thresholds passed (HSET2 gives 1 or 0); level =
// idx / 2 + max(idx - 4, 0) / 2 + max(idx - 6, 0) maps 0..7 to 0, 0.5, 1, 1.5, 2, 3, 4, 6; the
// product has a few significant bits, exact in fp16 like the float path it replaced (vals * s).
__device__ __forceinline__ uint32_t nvfp4_pair(uint32_t x, const Fp4HalfThresholds& th, __half2 s) {
  const __half2 a = __habs2(detail::bits_half2(x));
  __half2 idx = __hgt2(a, th.t[0]);
#pragma unroll
  for (int j = 1; j < 7; ++j) idx = __hadd2(idx, j % 2 ? __hge2(a, th.t[j]) : __hgt2(a, th.t[j]));
  const __half2 zero = __float2half2_rn(0.0f), half = __float2half2_rn(0.5f);
  const __half2 hi = __hfma2(__hmax2(__hsub2(idx, __float2half2_rn(4.0f)), zero), half,
                             __hmax2(__hsub2(idx, __float2half2_rn(6.0f)), zero));
  const __half2 v = __hmul2(__hfma2(idx, half, hi), s);
  return detail::half2_bits(v) | (x & 0x80008000u);  // -0 for a negative x below 0.25 step
}

// One block of 16 (raw: its two 16-byte words) quantized with the row's global scale gs, written
// back as fp16 code * block scale.
template <bool kRazer>
__device__ void quantize_block(const uint4 (&raw)[2], float gs, float sv_mag, __half* out) {
  const __half2* h2 = reinterpret_cast<const __half2*>(raw);
  __half2 m2 = __habs2(h2[0]);
#pragma unroll
  for (int i = 1; i < kBlock / 2; ++i) m2 = __hmax2(m2, __habs2(h2[i]));
  const float bmax = fmaxf(__low2float(m2), __high2float(m2));
  const uint32_t sc = detail::e4m3_code(double(bmax) / (double(gs) * 6.0));
  const float s = detail::e4m3_value(sc);
  const double step = double(gs) * double(s);
  if constexpr (kRazer) {
    const __half* hin = reinterpret_cast<const __half*>(raw);
    float xb[kBlock], vals[kBlock], minus[kBlock];
#pragma unroll
    for (int i = 0; i < kBlock; ++i) xb[i] = __half2float(hin[i]);
    const double err_plus = razer_block(xb, step, double(sv_mag), vals);
    if (razer_block(xb, step, -double(sv_mag), minus) < err_plus)
      for (int i = 0; i < kBlock; ++i) vals[i] = minus[i];
    // value * s is exact in fp16 (a few significant bits, within 2^-10 .. 2^12)
    alignas(16) __half h[kBlock];
#pragma unroll
    for (int i = 0; i < kBlock; ++i) h[i] = __float2half_rn(vals[i] * s);
    reinterpret_cast<uint4*>(out)[0] = reinterpret_cast<const uint4*>(h)[0];
    reinterpret_cast<uint4*>(out)[1] = reinterpret_cast<const uint4*>(h)[1];
  } else {
    uint32_t o[kBlock / 2] = {};  // an all-zero block (s = 0) stays +0
    if (s != 0.0f) {
      const Fp4HalfThresholds th{Fp4Thresholds(step)};
      const __half2 s2 = __float2half2_rn(s);
      const uint32_t* x = reinterpret_cast<const uint32_t*>(raw);
#pragma unroll
      for (int i = 0; i < kBlock / 2; ++i) o[i] = nvfp4_pair(x[i], th, s2);
    }
    reinterpret_cast<uint4*>(out)[0] = make_uint4(o[0], o[1], o[2], o[3]);
    reinterpret_cast<uint4*>(out)[1] = make_uint4(o[4], o[5], o[6], o[7]);
  }
}

// One CTA per row. Each thread loads its kPer blocks of 16 at once (all loads in flight) and keeps
// them in registers: the row's amax (exact in any order), gs, then each block quantized.
template <bool kRazer, int kPer>
__global__ void __launch_bounds__(kThreads)
    quantize_rows_kernel(const __half* x, int K, float sv_mag, __half* xq, float* row_scale) {
  const int nb = K / kBlock;
  const uint4* row8 = reinterpret_cast<const uint4*>(x + int64_t(blockIdx.x) * K);  // K % 16 == 0
  uint4 raw[kPer][2];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int b = threadIdx.x + j * kThreads;
    raw[j][0] = raw[j][1] = make_uint4(0, 0, 0, 0);
    if (b < nb) raw[j][0] = row8[2 * b], raw[j][1] = row8[2 * b + 1];
  }
  float amax = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j)
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float2 f = __half22float2(reinterpret_cast<const __half2*>(raw[j])[i]);
      amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
    }
  __shared__ float scratch[32];
  amax = detail::block_max(amax, scratch);
  float gs = amax / (448.0f * 6.0f);
  if (gs == 0.0f) gs = 1.0f;
  if (threadIdx.x == 0) row_scale[blockIdx.x] = gs;
  __half* out = xq + int64_t(blockIdx.x) * K;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int b = threadIdx.x + j * kThreads;
    if (b < nb) quantize_block<kRazer>(raw[j], gs, sv_mag, out + b * kBlock);
  }
}

template <bool kRazer>
void launch_quantize_rows(const __half* x, int M, int K, float sv, __half* xq, float* row_scale,
                          cudaStream_t stream) {
  const int per = (K / kBlock + kThreads - 1) / kThreads;
  auto go = [&](auto kernel) { kernel<<<M, kThreads, 0, stream>>>(x, K, sv, xq, row_scale); };
  if (per <= 1) go(quantize_rows_kernel<kRazer, 1>);
  else if (per <= 2) go(quantize_rows_kernel<kRazer, 2>);
  else if (per <= 4) go(quantize_rows_kernel<kRazer, 4>);
  else if (per <= 8) go(quantize_rows_kernel<kRazer, 8>);
  else go(quantize_rows_kernel<kRazer, 16>);
}

}  // namespace

bool is_w4a4_act_format(std::string_view f) { return f == "nvfp4" || f == "nvfp4-razer-act"; }

void quantize_rows_nvfp4(const uint16_t* x, int M, int K, std::string_view act_format, float sv, uint16_t* xq,
                         float* row_scale, cudaStream_t stream) {
  if (!is_w4a4_act_format(act_format))
    throw Error("quantize_rows_nvfp4: activation format '" + std::string(act_format) +
                "' has no GPU quantizer (nvfp4, nvfp4-razer-act)");
  if (M < 1 || K < kBlock || K % kBlock != 0 || K > kMaxK)
    throw Error("quantize_rows_nvfp4: K = " + std::to_string(K) + " must be a positive multiple of 16 up to " +
                std::to_string(kMaxK) + " (M = " + std::to_string(M) + ")");
  const auto* xi = reinterpret_cast<const __half*>(x);
  auto* xo = reinterpret_cast<__half*>(xq);
  if (act_format == "nvfp4")
    launch_quantize_rows<false>(xi, M, K, 0.0f, xo, row_scale, stream);
  else
    launch_quantize_rows<true>(xi, M, K, sv, xo, row_scale, stream);
  NIBBLE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nibble::cuda

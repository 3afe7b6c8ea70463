#pragma once
// An fp16 pair as the 32-bit word that decoders, GEMMs and attention pass around, and back.
#include <cuda_fp16.h>

#include <cstdint>

namespace nibble::cuda::detail {

__device__ __forceinline__ uint32_t half2_bits(__half2 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ __forceinline__ __half2 bits_half2(uint32_t b) { return *reinterpret_cast<const __half2*>(&b); }
__device__ __forceinline__ float2 h2bits_to_float2(uint32_t h) { return __half22float2(bits_half2(h)); }

}  // namespace nibble::cuda::detail

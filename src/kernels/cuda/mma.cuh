#pragma once
// Warp-level tensor-core primitives (sm_80+) shared by the 16-token GEMV (gemv_mma.cuh) and decode
// attention (ops_attention_decode_tc.cu): the fp16 m16n8k16 mma, the ldmatrix fragment loads and
// the in-register transpose.
#include <cstdint>

#include "gemm_core.cuh"

namespace nibble::cuda::detail {

// d += A · B (FP32 accumulators in place).
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 fp16 matrices from shared memory: lane l gives the address of row l % 8 of matrix l / 8
// and receives row l / 4, columns 2 (l % 4) and + 1 of each (trans: column l / 4, rows 2 (l % 4)
// and + 1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(tc::smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(tc::smem_addr(p)));
}

// The transpose of an 8x8 fp16 matrix held as C fragments (lane l: row l / 4, columns 2 (l % 4)
// and + 1): lane l then holds row l / 4 of the transpose.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

}  // namespace nibble::cuda::detail

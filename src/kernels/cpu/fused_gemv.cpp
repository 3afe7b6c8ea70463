// Dispatch of the fused small-M kernels by format family.
#include "kernels/cpu/fused_gemv.h"

#include "kernels/cpu/fused_driver.h"

namespace nibble::cpu {

bool fused_linear_cpu(const float* x, int64_t M, const PackedTensor& w, float* y) {
  if (M < 1 || M > kFusedMaxM || w.rows <= 0 || w.cols <= 0) return false;
  return fused_fp4_linear(x, M, w, y) || fused_nf4_linear(x, M, w, y) ||
         fused_int4_linear(x, M, w, y) || fused_half_linear(x, M, w, y);
}

}  // namespace nibble::cpu

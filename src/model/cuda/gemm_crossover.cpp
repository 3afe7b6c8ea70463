#include "model/cuda/gemm_crossover.h"

namespace nibble::cuda {

int gemm_crossover_m(std::string_view /*format*/, int64_t /*K*/, int64_t /*N*/) { return 16; }

int dequant_crossover_m(std::string_view format, int64_t /*K*/, int64_t /*N*/) {
  return format.starts_with("nestedfp") ? 1 << 30 : 256;  // nestedfp has no dequantize path
}

}  // namespace nibble::cuda

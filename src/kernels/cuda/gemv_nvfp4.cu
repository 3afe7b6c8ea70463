// NVFP4 GEMV: the bit-placement decoder and the shared-memory table decoder.
#include "gemv.cuh"
#include "gemv_mma.cuh"
#include "gemv_stream.cuh"
#include "nvfp4_policy.cuh"

namespace nibble::cuda::detail {

void launch_nvfp4_bits(const GemvArgs& a, int r, cudaStream_t s) { launch_fp4_gemv<Nvfp4Bits<false>>(a, r, s); }
void launch_nvfp4_lut(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Nvfp4Lut<false>>(a, r, s); }
void launch_mma_nvfp4(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Nvfp4Bits<false>>(a, s); }
void launch_stream_nvfp4(const GemvArgs& a, cudaStream_t s) {
  launch_gemv_stream<Nvfp4Bits<false>, WeightKind::nvfp4>(a, s);
}

}  // namespace nibble::cuda::detail

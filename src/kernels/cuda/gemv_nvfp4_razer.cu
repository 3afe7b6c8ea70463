// NVFP4-RaZeR GEMV: the bit-placement decoder (-0 selects the block's special value; by byte
// table where the special values allow) and the shared-memory table decoder (four tables, one per
// special value).
#include "gemv.cuh"
#include "gemv_mma.cuh"
#include "gemv_stream.cuh"
#include "nvfp4_policy.cuh"

namespace nibble::cuda::detail {

void launch_nvfp4_razer_bits(const GemvArgs& a, int r, cudaStream_t s) {
  launch_razer_gemv<Nvfp4RazerTable, Nvfp4Bits<true>>(a, r, s);
}
void launch_nvfp4_razer_lut(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Nvfp4Lut<true>>(a, r, s); }
void launch_mma_nvfp4_razer(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Nvfp4Bits<true>>(a, s); }
void launch_stream_nvfp4_razer(const GemvArgs& a, cudaStream_t s) {
  launch_gemv_stream<Nvfp4Bits<true>, WeightKind::nvfp4_razer>(a, s);
}

}  // namespace nibble::cuda::detail

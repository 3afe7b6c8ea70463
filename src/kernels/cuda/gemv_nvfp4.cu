// NVFP4 GEMV: the bit-placement decoder and the shared-memory table decoder.
#include "gemv.cuh"
#include "gemv_mma.cuh"
#include "gemv_stream.cuh"
#include "nvfp4_policy.cuh"

namespace nibble::cuda::detail {

void launch_nvfp4_bits(const GemvArgs& a, int r, cudaStream_t s) { launch_fp4_gemv<Nvfp4Bits<false>>(a, r, s); }
void launch_nvfp4_lut(const GemvArgs& a, int r, cudaStream_t s) { launch_gemv<Nvfp4Lut<false>>(a, r, s); }
void launch_mma_nvfp4(const GemvArgs& a, cudaStream_t s) { launch_gemv_mma<Nvfp4Bits<false>>(a, s); }
// M <= 8, K % 64 == 0 and the shared memory (ring, reduction, X) within the opt-in limit.
bool stream_fits(int M, int K, int row_blocks) {
  if (M < 1 || M > 8 || K % 64 != 0) return false;
  const size_t smem = row_blocks == 1   ? StreamCfg<1, kStreamCpw>::smem_bytes(M, K)
                      : row_blocks == 2 ? StreamCfg<2, kStreamCpw>::smem_bytes(M, K)
                                        : StreamCfg<4, kStreamCpw>::smem_bytes(M, K);
  return smem <= size_t(kStreamSmemLimit);
}
void launch_stream_nvfp4(const GemvArgs& a, cudaStream_t s) { launch_gemv_stream<Nvfp4Bits<false>>(a, s); }

}  // namespace nibble::cuda::detail

// NestedFP8 (paper 004, FP8 mode) on cuBLASLt's FP8 tensor cores: per-token E4M3 quantization of
// the activations (in the device K order of the planes), then one cuBLASLt FP8 GEMM against the
// upper byte plane as stored, the per-token scale 1 / (256 sx) applied in cuBLASLt's epilogue (or a
// row-scale pass).
#include <string>

#include "nibble/cuda/gemm.h"
#include "nibble/error.h"

namespace nibble::cuda {

CublasLtFp8& GemmWorkspace::cublaslt_fp8() {
  if (!lt_) lt_ = std::make_unique<CublasLtFp8>();
  return *lt_;
}

void gemm_nestedfp8_cublaslt(const uint16_t* x, int M, const GemmWeight& w, uint16_t* y, GemmWorkspace& ws,
                             CublasLtFp8& lt, cudaStream_t stream, CublasLtFp8::RowScale how) {
  if (w.format != "nestedfp8" && w.format != "nestedfp")
    throw Error("gemm_nestedfp8_cublaslt: weight format '" + w.format + "' is not nestedfp8 / nestedfp");
  if (!w.codes) throw Error("gemm_nestedfp8_cublaslt: empty GemmWeight (no upper plane)");
  const int N = int(w.N), K = int(w.K);
  if (M < 1 || N < 8 || K < 16 || N % 8 != 0 || K % 16 != 0)
    throw Error("gemm_nestedfp8_cublaslt: unsupported shape M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " (need M >= 1, N a multiple of 8, K a multiple of 16)");
  // Slot 1: x8 [M, K], then row_scale [M] at the next 256-byte boundary (cuBLASLt wants 16).
  const size_t x8_bytes = (size_t(M) * K + 255) / 256 * 256;
  auto* x8 = static_cast<uint8_t*>(ws.get(x8_bytes + size_t(M) * sizeof(float), 1));
  auto* row_scale = reinterpret_cast<float*>(x8 + x8_bytes);
  quantize_rows_e4m3_vec(x, M, K, x8, row_scale, stream, KOrder::nested);
  lt.gemm_row_scaled(x8, row_scale, static_cast<const uint8_t*>(w.codes), y, M, N, K, ws, stream, how);
}

}  // namespace nibble::cuda

// The GEMM front end: which formats have a kernel, the offline repack + upload of a PackedTensor
// into the kernels' layout, and gemm(), which routes a weight to its kernel.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "gemm_kernels.cuh"
#include "gemm_wgmma.cuh"
#include "nibble/cuda/check.h"
#include "nibble/cuda/gemm.h"
#include "nibble/error.h"
#include "nibble/half.h"
#include "repack.h"

namespace nibble::cuda {

tc::W4Decode tc::w4_decode(std::string_view format) {
  if (format == "int4-g128") return W4Decode::int4;
  if (format == "nf4") return W4Decode::nf4;
  return format == "nvfp4-razer" || format == "razer-fp4-g128" ? W4Decode::fp4_special : W4Decode::fp4;
}

namespace {

constexpr const char* kFormats[] = {"nestedfp", "nestedfp8", "nvfp4", "nvfp4-razer", "fp4-g128", "razer-fp4-g128",
                                    "int4-g128", "mxfp4", "nf4"};

bool is_nested(std::string_view f) { return f == "nestedfp" || f == "nestedfp8"; }

// E4M3 ("fn") and unsigned E3M3 codes to float; both are exact in fp16.
float e4m3_value(uint8_t b, std::string_view name) {
  if ((b & 0x7F) == 0x7F) throw Error(fmt::format("{}: NaN E4M3 scale", name));
  const int e = (b >> 3) & 0xF, m = b & 7;
  const float v = e == 0 ? std::ldexp(m / 8.0f, -6) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return (b & 0x80) ? -v : v;
}
float e3m3_value(uint8_t s) {
  const int e = (s >> 3) & 7, m = s & 7;
  return e == 0 ? std::ldexp(m / 8.0f, -2) : std::ldexp(1.0f + m / 8.0f, e - 3);
}
uint16_t get_u16(const std::vector<uint8_t>& v, size_t i) {
  uint16_t x;
  std::memcpy(&x, v.data() + 2 * i, 2);
  return x;
}
uint32_t meta_word(float scale, float high) {
  return uint32_t(float_to_half(scale)) | (uint32_t(float_to_half(high)) << 16);
}

// Serialized nibbles (element 2j low) -> per 32-k chunk four words; word t holds, at nibble p
// (low) and p + 4 (high), the pairs (4t, 4t+1), (4t+2, 4t+3), (16+4t, 17+4t), (18+4t, 19+4t):
// thread t's fragment pairs in gemm_core.cuh's permuted K order.
std::vector<uint32_t> repack_codes(const std::vector<uint8_t>& q, int64_t N, int64_t K) {
  auto code = [&](int64_t n, int64_t k) { return uint32_t(q[size_t(n * K / 2 + k / 2)] >> (4 * (k & 1))) & 0xF; };
  std::vector<uint32_t> out(size_t(N * K / 8));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < K / 32; ++c)
      for (int t = 0; t < 4; ++t) {
        const int64_t first[4] = {4 * t, 4 * t + 2, 16 + 4 * t, 18 + 4 * t};
        uint32_t w = 0;
        for (int p = 0; p < 4; ++p) {
          w |= code(n, 32 * c + first[p]) << (4 * p);
          w |= code(n, 32 * c + first[p] + 1) << (4 * (p + 4));
        }
        out[size_t((n * (K / 32) + c) * 4 + t)] = w;
      }
  return out;
}

// A NestedFP plane [N, K] (K a multiple of 64) in KOrder::nested.
std::vector<uint8_t> nested_order(const std::vector<uint8_t>& plane, int64_t N, int64_t K) {
  std::vector<uint8_t> out(plane.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) out[size_t(n * K + nested_position(k))] = plane[size_t(n * K + k)];
  return out;
}

// MXFP4's E8M0 scales 2^(e - 127) span more than fp16 can hold, so they are stored as fp16
// 2^(e - 127 - shift), with 2^shift moved into the epilogue's alpha. shift puts the largest scale
// of the tensor at 2^13 (6 * 2^13 < 65504); blocks of all-zero codes do not count. Returns shift.
int mxfp4_scale_shift(const PackedTensor& t, std::string_view name) {
  const detail::ExponentRange r = detail::mxfp4_exponent_range(t.qweight, t.scales, t.rows * (t.cols / 32), name);
  if (r.hi < 0) return 0;
  // the smallest scale must stay a normal fp16 (>= 2^-14) so value * scale is exact
  if (r.hi - r.lo > 27)
    throw Error(fmt::format("{}: MXFP4 block scales span 2^{} (more than 2^27): no fp16 GEMM path", name,
                            r.hi - r.lo));
  return r.hi - 127 - 13;
}

// Per (group, column) metadata words, group-major.
std::vector<uint32_t> repack_meta(const PackedTensor& t, std::string_view name, int mx_shift) {
  const int64_t N = t.rows, G = t.cols / t.block;
  std::vector<uint32_t> out(size_t(N * G));
  const std::string& f = t.format;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const size_t i = size_t(n * G + g);
      uint32_t w = 0;
      if (f == "nvfp4") {
        w = meta_word(e4m3_value(t.scales[i], name), 0.0f);
      } else if (f == "nvfp4-razer") {
        const uint8_t b = t.scales[i];
        const float sv = ((b & 0x80) ? -1.0f : 1.0f) * ((b & 0x40) ? t.sv_b : t.sv_a);
        w = meta_word(e3m3_value(b & 0x3F), sv);
      } else if (f == "fp4-g128") {
        w = get_u16(t.scales, i);
      } else if (f == "mxfp4") {
        const int e = t.scales[i] - 127 - mx_shift;
        w = e < -14 ? 0u : meta_word(std::ldexp(1.0f, e), 0.0f);  // below: an all-zero block
      } else if (f == "nf4") {
        std::memcpy(&w, t.scales.data() + 4 * i, 4);  // the FP32 absmax itself
      } else if (f == "razer-fp4-g128") {
        const uint16_t s = get_u16(t.scales, i);
        const float sv = ((s & 0x8000) ? -1.0f : 1.0f) * ((s & 0x4000) ? t.sv_b : t.sv_a);
        w = uint32_t(s & 0x3FFF) | (uint32_t(float_to_half(sv)) << 16);
      } else {  // int4-g128: 4-bit zero points, two per byte, per row ceil(G / 2) bytes
        const uint8_t zb = t.aux[size_t(n * ((G + 1) / 2) + g / 2)];
        const int z = (zb >> (4 * (g & 1))) & 0xF;
        w = uint32_t(get_u16(t.scales, i)) | (uint32_t(float_to_half(1024.0f + z)) << 16);
      }
      out[size_t(g * N + n)] = w;
    }
  return out;
}

// From this many rows on, the Hopper wgmma kernels (gemm_wgmma_*.cu) run the fp16 paths on sm_90;
// below, and on other GPUs, the mma.sync kernels (docs/perf/gemm-notes.md, "wgmma"). The
// environment variable NIBBLE_WGMMA_MIN_M overrides it (benchmarks: a huge value disables wgmma).
bool use_wgmma(int M) {
  static const int min_m = [] {
    const char* e = std::getenv("NIBBLE_WGMMA_MIN_M");
    return e && *e ? std::atoi(e) : 32;
  }();
  return M >= min_m && wg::supported();
}

// nestedfp8 from this many rows on: cuBLASLt's FP8 GEMM (3-5x the mma.sync e4m3 kernel, whose
// accumulation is FP32-exact where cuBLASLt's FP8 accumulation on Hopper is not; see gemm.h).
constexpr int kNestedFp8LtMinM = 64;

void w4a16_routed(const uint16_t* x, int M, const GemmWeight& w, uint16_t* y, GemmWorkspace& ws, int split_k,
                  cudaStream_t stream, const float* row_scale) {
  const auto* codes = static_cast<const uint32_t*>(w.codes);
  const auto* meta = static_cast<const uint32_t*>(w.meta);
  const int N = int(w.N), K = int(w.K);
  if (use_wgmma(M))
    wg::w4a16(x, M, codes, meta, w.block, tc::w4_decode(w.format), N, K, w.global_scale, y, ws, split_k, stream, row_scale);
  else
    tc::w4a16(x, M, codes, meta, w.block, tc::w4_decode(w.format), N, K, w.global_scale, y, ws, split_k, stream, row_scale);
}

void* upload_bytes(const void* host, size_t bytes) {
  void* d = nullptr;
  NIBBLE_CUDA_CHECK(cudaMalloc(&d, bytes));
  NIBBLE_CUDA_CHECK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
  return d;
}

void check_sizes(const PackedTensor& t, std::string_view name) {
  const size_t n = size_t(t.rows) * size_t(t.cols);
  const bool nested = is_nested(t.format);
  const size_t want_q = nested ? n : n / 2;
  if (t.qweight.size() != want_q)
    throw Error(fmt::format("{}: qweight has {} bytes, {} [{} x {}] needs {}", name, t.qweight.size(), t.format,
                            t.rows, t.cols, want_q));
  if (t.format == "nestedfp" && t.aux.size() != n)
    throw Error(fmt::format("{}: aux (lower plane) has {} bytes, needs {}", name, t.aux.size(), n));
  if (!nested) {
    const size_t groups = n / size_t(t.block);
    const size_t per_group = t.format.rfind("nvfp4", 0) == 0 || t.format == "mxfp4" ? 1 : t.format == "nf4" ? 4 : 2;
    const size_t want_s = per_group * groups;
    if (t.scales.size() != want_s)
      throw Error(fmt::format("{}: scales has {} bytes, {} needs {}", name, t.scales.size(), t.format, want_s));
    if (t.format == "int4-g128" && t.aux.size() != size_t(t.rows) * size_t((t.cols / t.block + 1) / 2))
      throw Error(fmt::format("{}: aux (zero points) has {} bytes", name, t.aux.size()));
  }
}

}  // namespace

std::vector<std::string> gemm_formats() { return {std::begin(kFormats), std::end(kFormats)}; }

bool has_gemm_kernel(std::string_view format) {
  return std::find(std::begin(kFormats), std::end(kFormats), format) != std::end(kFormats);
}

GemmWeight upload_gemm(const PackedTensor& t, std::string_view name) {
  if (!has_gemm_kernel(t.format))
    throw Error(fmt::format("{}: format '{}' has no GEMM kernel (have: {})", name, t.format,
                            fmt::join(gemm_formats(), ", ")));
  const bool nested = is_nested(t.format);
  const int block = nested ? 1 : t.block;
  const int64_t k_multiple = t.format == "nestedfp8" ? 128 : 64;
  if (t.rows < 8 || t.rows % 8 != 0 || t.cols % k_multiple != 0 || t.cols == 0 || block <= 0 || t.cols % block != 0 ||
      (!nested && block != 16 && block != 32 && block % 64 != 0))
    throw Error(fmt::format("{}: {} [{} x {}] block {}: the GEMM needs N a multiple of 8 and K a multiple of {} and "
                            "of the block (16, 32 or a multiple of 64)",
                            name, t.format, t.rows, t.cols, t.block, k_multiple));
  check_sizes(t, name);
  GemmWeight w;
  w.format = t.format;
  w.N = t.rows, w.K = t.cols, w.block = block, w.global_scale = t.global_scale;
  if (nested) {
    w.codes_bytes = t.qweight.size();
    w.codes = upload_bytes(nested_order(t.qweight, t.rows, t.cols).data(), w.codes_bytes);
    if (t.format == "nestedfp") {
      w.meta_bytes = t.aux.size();
      w.meta = upload_bytes(nested_order(t.aux, t.rows, t.cols).data(), w.meta_bytes);
    }
    return w;
  }
  const std::vector<uint32_t> codes = repack_codes(t.qweight, t.rows, t.cols);
  const int mx_shift = t.format == "mxfp4" ? mxfp4_scale_shift(t, name) : 0;
  if (mx_shift != 0) w.global_scale = std::ldexp(t.global_scale, mx_shift);
  const std::vector<uint32_t> meta = repack_meta(t, name, mx_shift);
  w.codes_bytes = codes.size() * 4, w.meta_bytes = meta.size() * 4;
  w.codes = upload_bytes(codes.data(), w.codes_bytes);
  w.meta = upload_bytes(meta.data(), w.meta_bytes);
  return w;
}

void gemm(const uint16_t* x, int M, const GemmWeight& w, uint16_t* y, GemmWorkspace& ws, cudaStream_t stream,
          const GemmOptions& opt) {
  if (!w.codes) throw Error("gemm: empty GemmWeight");
  const int N = int(w.N), K = int(w.K);
  if (w.format == "nestedfp") {
    const auto* upper = static_cast<const uint8_t*>(w.codes);
    const auto* lower = static_cast<const uint8_t*>(w.meta);
    if (use_wgmma(M))
      wg::nestedfp16(x, M, upper, lower, N, K, y, ws, opt.split_k, stream);
    else
      tc::nestedfp16(x, M, upper, lower, N, K, y, ws, opt.split_k, stream);
  } else if (w.format == "nestedfp8" && M >= kNestedFp8LtMinM) {
    gemm_nestedfp8_cublaslt(x, M, w, y, ws, ws.cublaslt_fp8(), stream);
  } else if (w.format == "nestedfp8") {
    auto* x8 = static_cast<uint8_t*>(ws.get(size_t(M) * K + size_t(M) * sizeof(float) + 256, 1));
    auto* row_scale = reinterpret_cast<float*>(x8 + (size_t(M) * K + 255) / 256 * 256);
    quantize_rows_e4m3(x, M, K, x8, row_scale, stream, KOrder::nested);
    gemm_e4m3(x8, row_scale, M, static_cast<const uint8_t*>(w.codes), N, K, y, ws, stream, opt);
  } else {
    w4a16_routed(x, M, w, y, ws, opt.split_k, stream, nullptr);
  }
}

void dequantize_fp16(const GemmWeight& w, uint16_t* out, cudaStream_t stream) {
  if (!w.codes) throw Error("dequantize_fp16: empty GemmWeight");
  if (is_nested(w.format)) throw Error(fmt::format("dequantize_fp16: {} weights have their own FP16/FP8 GEMMs", w.format));
  tc::w4_dequantize(static_cast<const uint32_t*>(w.codes), static_cast<const uint32_t*>(w.meta), w.block,
                    tc::w4_decode(w.format), int(w.N), int(w.K), w.global_scale, out, stream);
}

void gemm_w4a4(const uint16_t* x, int M, const GemmWeight& w, std::string_view act_format, float act_sv, uint16_t* y,
               GemmWorkspace& ws, cudaStream_t stream, const GemmOptions& opt) {
  if (!w.codes) throw Error("gemm_w4a4: empty GemmWeight");
  if (is_nested(w.format)) throw Error(fmt::format("gemm_w4a4: {} weights are not 4-bit", w.format));
  const size_t xq_bytes = (size_t(M) * w.K * 2 + 255) / 256 * 256;
  auto* xq = static_cast<uint8_t*>(ws.get(xq_bytes + size_t(M) * sizeof(float), 1));
  auto* row_scale = reinterpret_cast<float*>(xq + xq_bytes);
  quantize_rows_nvfp4(x, M, int(w.K), act_format, act_sv, reinterpret_cast<uint16_t*>(xq), row_scale, stream);
  w4a16_routed(reinterpret_cast<const uint16_t*>(xq), M, w, y, ws, opt.split_k, stream, row_scale);
}

}  // namespace nibble::cuda

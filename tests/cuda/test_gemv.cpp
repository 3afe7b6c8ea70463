// GPU GEMV kernels vs a float64 CPU reference of X · dequant(W)^T, where dequant is the CPU format
// registry's own decoder. Fresh random data every run (seed printed on failure), odd N, K a
// multiple of the group size, M = 1..16, outputs poisoned with NaN before each launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cuda/gpu_buffer.h"
#include "nibble/cuda/linear.h"
#include "nibble/cuda/tuning.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/half.h"

namespace nibble::cuda {
namespace {

using test::GpuBuffer;

struct Case {
  std::string format;
  int64_t N, K;
};

std::vector<float> random_weights(int64_t N, int64_t K, std::mt19937_64& g) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> w(size_t(N * K));
  for (auto& v : w) v = d(g);
  for (int64_t k = 0; k < K; ++k) w[size_t(K + k)] = 0.0f;  // row 1 all zero: zero scales
  for (int64_t k = 0; k < K; ++k) w[size_t(k)] *= 1e-3f;   // row 0 tiny: small scales / subnormals
  return w;
}

// How many FP4 codes of t are 0b1000 (RaZeR's special value).
int64_t fp4_special_codes(const PackedTensor& t) {
  int64_t n = 0;
  for (uint8_t b : t.qweight) n += ((b & 15) == 8) + ((b >> 4) == 8);
  return n;
}

std::vector<uint16_t> random_x(int M, int64_t K, std::mt19937_64& g) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> x(size_t(M * K));
  for (auto& v : x) v = float_to_half(d(g));
  return x;
}

// The CUDA-core GEMV of these formats sums products in fp16 (gemv.cuh, chunk_dot) over runs of
// this many consecutive elements: per run, one sum of the elements with k % 8 < 4 and one of the
// rest, in order of k. 0: FP32 sums.
int half_run(const std::string& format) {
  if (format.rfind("nvfp4", 0) == 0) return 16;
  return format == "mxfp4" || format == "int4-g128" || format == "fp4-g128" || format == "razer-fp4-g128" ? 32 : 0;
}

// float64 X · W^T and sum |x w| per output, [M, N]; with half_run > 0 also the bound on the fp16
// sums' rounding: each add rounds the running sum S_j by at most 2^-11 |S_j|, so sum over the runs
// of 2^-11 * sum_j |S_j| (a little more for the error already in S_j).
struct Reference {
  std::vector<double> y, mag, half_err;
};
Reference reference(const std::vector<uint16_t>& x, const std::vector<float>& w, int M, int64_t N, int64_t K,
                    int half_run) {
  const size_t n_out = size_t(M * N);
  Reference r{std::vector<double>(n_out), std::vector<double>(n_out), std::vector<double>(n_out)};
  for (int m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0, mag = 0, err = 0, run[2] = {0, 0};
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(half_to_float(x[size_t(m * K + k)])) * double(w[size_t(n * K + k)]);
        ref += p;
        mag += std::fabs(p);
        if (half_run > 0) {
          if (k % half_run == 0) run[0] = run[1] = 0;
          double& s = run[k % 8 >= 4];
          s += p;
          err += std::fabs(s);
        }
      }
      const size_t i = size_t(m * N + n);
      r.y[i] = ref, r.mag[i] = mag, r.half_err[i] = 1.01 * 0x1p-11 * err;
    }
  return r;
}

// Checks y (fp16, [M, N]) against the reference: every element written and finite, each within
// fp16 rounding of the output plus a small multiple of the sum's natural rounding scale, plus
// weight_rel * sum |x w| where the kernel rounds each weight by up to that relative amount, plus
// the fp16 sums' bound where the kernel may sum in fp16 (half_sums).
void expect_close(const std::vector<uint16_t>& y, const Reference& r, const std::string& what, double weight_rel,
                  bool half_sums = false) {
  int bad = 0;
  for (size_t i = 0; i < r.y.size(); ++i) {
    const double ref = r.y[i];
    const float got = half_to_float(y[i]);
    const double tol = 1.0e-3 * std::fabs(ref) + (2.0e-6 + weight_rel) * r.mag[i] + 1e-7 + (half_sums ? r.half_err[i] : 0.0);
    if (!std::isfinite(got) || std::fabs(double(got) - ref) > tol) {
      if (++bad <= 5)
        ADD_FAILURE() << what << ": y[" << i << "] = " << got << ", reference " << ref << " (tolerance " << tol << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " wrong outputs";
}

class GemvTest : public ::testing::TestWithParam<Case> {};

TEST_P(GemvTest, MatchesFloat64ReferenceForEveryM) {
  const Case c = GetParam();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const std::vector<float> w = random_weights(c.N, c.K, g);
  const PackedTensor t = quantize(c.format, w.data(), c.N, c.K);
  const std::vector<float> wq = dequantize(t);  // the CPU registry's decode: the reference weights
  if (c.format.find("razer") != std::string::npos) {
    // the special value must actually occur, or the test could not catch a wrong sv decode
    int64_t specials = 0;
    if (c.format == "razer-fp3-g128") {
      for (size_t i = 0; i + 12 <= t.qweight.size(); i += 12) {
        uint32_t p[3];
        std::memcpy(p, t.qweight.data() + i, 12);
        specials += __builtin_popcount(p[2] & ~p[1] & ~p[0]);
      }
    } else {
      specials = fp4_special_codes(t);
    }
    ASSERT_GT(specials, 0) << "no special-value codes in the test weights";
  }
  const DeviceWeight dw = upload(t, c.format);
  EXPECT_EQ(dw.N, c.N);

  std::vector<std::pair<std::string, LinearOptions>> variants;
  for (int rpw : {2, 4})
    for (int ks : {1, 2, 4, 8}) {  // k_splits 8 leaves some warps without chunks on small K
      LinearOptions o;
      o.engine = Engine::cuda_cores;
      o.rows_per_warp = rpw;
      o.k_splits = ks;
      const std::string name = "rows_per_warp " + std::to_string(rpw) + " k_splits " + std::to_string(ks);
      variants.push_back({name, o});
      if (c.format.rfind("nvfp4", 0) == 0 && (ks == 1 || ks == 4)) {
        o.fp4_decode = Fp4Decode::lut;
        variants.push_back({"lut, " + name, o});
      }
    }
  LinearOptions tc;
  tc.engine = Engine::tensor_cores;
  const bool has_tc = c.format != "razer-fp3-g128" && c.format != "fp16" && c.K % 64 == 0;
  EXPECT_EQ(dw.qweight_mma != nullptr, has_tc);
  if (has_tc) {
    variants.push_back({"tensor cores", tc});
    for (int rb : {1, 2, 4}) {  // 2 and 4: row blocks past N
      LinearOptions o = tc;
      o.row_blocks = rb;
      variants.push_back({"tensor cores row_blocks " + std::to_string(rb), o});
    }
    // K split over a cluster of CTAs (sm_90); 4 parts of a short K leave CTAs without chunks
    for (int ks : {2, 4}) {
      LinearOptions o = tc;
      o.row_blocks = ks == 2 ? 1 : 2, o.k_splits = ks;
      const std::string name = "tensor cores row_blocks " + std::to_string(o.row_blocks) + " k_splits " + std::to_string(ks);
      if (tensor_core_splits_supported()) variants.push_back({name, o});
    }
  }
  // the stream kernel (sm_90): every format with a tile layout, row_blocks 1 or 2, X [M, K] in
  // shared memory beside the ring; refused otherwise
  std::vector<std::pair<std::string, LinearOptions>> stream_variants;
  for (int rb : {1, 2, 4}) {
    LinearOptions o;
    o.engine = Engine::tensor_stream, o.row_blocks = rb;
    stream_variants.push_back({"tensor stream row_blocks " + std::to_string(rb), o});
  }
  variants.push_back({"dispatcher's choice", LinearOptions{}});
  for (int M = 1; M <= 16; ++M) {
    const std::vector<uint16_t> x = random_x(M, c.K, g);
    const Reference ref = reference(x, wq, M, c.N, c.K, half_run(c.format));
    GpuBuffer<uint16_t> dx(x), dy(size_t(M * c.N));
    if (!has_tc) {
      EXPECT_THROW(linear(dx.get(), M, dw, dy.get(), nullptr, tc), Error);
    }
    for (const auto& [name, opt] : stream_variants) {
      if (!has_tc || opt.row_blocks == 4 || !tensor_core_splits_supported()) {  // sm_90 only
        EXPECT_THROW(linear(dx.get(), M, dw, dy.get(), nullptr, opt), Error) << name << " M=" << M;
        continue;
      }
      if (!stream_kernel_fits(dw, M, opt.row_blocks)) {  // X too large for shared memory beside the ring
        ASSERT_GT(M * c.K, 16 * 4096) << name << ": X of M = " << M << ", K = " << c.K << " must fit";
        EXPECT_THROW(linear(dx.get(), M, dw, dy.get(), nullptr, opt), Error);
        continue;
      }
      dy.poison();
      linear(dx.get(), M, dw, dy.get(), nullptr, opt);
      expect_close(dy.host(), ref,
                   c.format + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " M=" + std::to_string(M) +
                       " " + name,
                   c.format == "nf4" ? 0x1p-11 : 0.0);
    }
    for (const auto& [name, opt] : variants) {
      dy.poison();
      linear(dx.get(), M, dw, dy.get(), nullptr, opt);
      // the tensor-core NF4 path (forced, or the dispatcher's pick) multiplies fp16-rounded levels
      // (relative error <= 2^-11)
      const bool nf4_tc = c.format == "nf4" && opt.engine != Engine::cuda_cores;
      // fp16 sums: the CUDA-core bit decoders (forced, or maybe the dispatcher's pick)
      const bool half_sums = opt.engine != Engine::tensor_cores && opt.fp4_decode != Fp4Decode::lut;
      expect_close(dy.host(), ref,
                   c.format + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " M=" +
                       std::to_string(M) + " " + name,
                   nf4_tc ? 0x1p-11 : 0.0, half_sums);
    }
  }
}

// N odd and not a multiple of the 16 / 32 rows of a CTA; K a multiple of the group size whose
// chunk count per row is not a multiple of the 64 chunks a warp takes per step.
INSTANTIATE_TEST_SUITE_P(
    Formats, GemvTest,
    ::testing::Values(Case{"nvfp4", 37, 96}, Case{"nvfp4", 131, 1088}, Case{"nvfp4-4over6", 19, 512},
                      Case{"nvfp4-razer", 37, 96}, Case{"nvfp4-razer", 131, 1088}, Case{"mxfp4", 45, 160},
                      Case{"mxfp4", 129, 2112}, Case{"fp4-g128", 33, 384}, Case{"fp4-g128", 77, 2176},
                      Case{"razer-fp4-g128", 33, 384}, Case{"razer-fp4-g128", 77, 2176},
                      Case{"razer-fp3-g128", 29, 256}, Case{"razer-fp3-g128", 70, 4224},
                      Case{"int4-g128", 41, 384}, Case{"int4-g128", 99, 2176}, Case{"nf4", 23, 192},
                      Case{"nf4", 101, 2112},
                      // the stream kernel: one stage, and 36 / 68 chunks (ragged last stages, more
                      // stages than the ring holds)
                      Case{"nvfp4", 70, 512}, Case{"nvfp4", 131, 2304}, Case{"nvfp4-razer", 75, 4352},
                      // long rows: several steps per K split, the last one ragged
                      Case{"nvfp4-razer", 133, 8256}, Case{"int4-g128", 67, 8320},
                      Case{"razer-fp3-g128", 35, 8448},
                      // one row too long for X in shared memory: the FP8-conversion decoder
                      Case{"fp4-g128", 71, 8320}, Case{"nvfp4", 69, 8256}, Case{"mxfp4", 73, 8224},
                      // plain FP16: K a multiple of 8 only, one and several steps per row
                      Case{"fp16", 33, 40}, Case{"fp16", 130, 4104}),
    [](const auto& info) {
      std::string n = info.param.format + "_" + std::to_string(info.param.N) + "x" + std::to_string(info.param.K);
      for (auto& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

// The fp16 sums of the CUDA-core path (chunk_dot) stay finite at the top of fp16's range: every
// weight decodes to its format's largest code (one negative per group gives INT4 its range) and X
// is 60000 everywhere, so each run's sums are as large as the decoders' scaling allows. K = 8320:
// X too long for shared memory, where the plain FP4 formats take the FP8-conversion decoder.
TEST(GemvHalfSums, StayFiniteForLargeActivations) {
  for (const std::string format : {"nvfp4", "nvfp4-razer", "mxfp4", "int4-g128", "fp4-g128", "razer-fp4-g128"})
    for (const int64_t K : {512, 8320}) {
      const int64_t N = 34;
      std::vector<float> w(size_t(N * K), 1e-4f);
      for (size_t i = 0; i < w.size(); i += 128) w[i] = -1e-4f;
      const PackedTensor t = quantize(format, w.data(), N, K);
      const std::vector<float> wq = dequantize(t);
      const DeviceWeight dw = upload(t, format);
      const std::vector<uint16_t> x(size_t(K), float_to_half(60000.0f));
      const Reference ref = reference(x, wq, 1, N, K, half_run(format));
      GpuBuffer<uint16_t> dx(x), dy{size_t(N)};
      LinearOptions o;
      o.engine = Engine::cuda_cores;
      dy.poison();
      linear(dx.get(), 1, dw, dy.get(), nullptr, o);
      expect_close(dy.host(), ref, format + " K=" + std::to_string(K) + " X = 60000", 0.0, true);
    }
}

// One row past a resident grid's rows (the persistent one-row kernel of the non-RaZeR fp16-pair
// formats: each warp walks several row pairs, loading the next pair's first chunks during the
// current pair's last step): N odd, twice the rows of 4 CTAs per SM and more; K with one ragged
// step and with several.
TEST(GemvPersistent, MatchesFloat64ReferenceBeyondOneResidentGrid) {
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const int64_t N = int64_t(16) * 4 * sms * 2 + 37;
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  for (const std::string format : {"nvfp4", "mxfp4", "int4-g128", "fp4-g128"})
    for (const int64_t K : {384, 2176}) {
      const std::vector<float> w = random_weights(N, K, g);
      const PackedTensor t = quantize(format, w.data(), N, K);
      const DeviceWeight dw = upload(t, format);
      const std::vector<uint16_t> x = random_x(1, K, g);
      const Reference ref = reference(x, dequantize(t), 1, N, K, half_run(format));
      GpuBuffer<uint16_t> dx(x), dy{size_t(N)};
      LinearOptions o;
      o.engine = Engine::cuda_cores, o.rows_per_warp = 2, o.k_splits = 1;
      dy.poison();
      linear(dx.get(), 1, dw, dy.get(), nullptr, o);
      expect_close(dy.host(), ref, format + " N=" + std::to_string(N) + " K=" + std::to_string(K), 0.0, true);
    }
}

// The stream kernel's persistent grid: more units of row blocks than CTAs (three or more per CTA, so
// its ring wraps around and the producer runs ahead into the next unit), a ragged last stage, every
// format with a tile layout, one and two token tiles.
TEST(GemvStream, MatchesFloat64ReferenceBeyondOneResidentGrid) {
  if (!tensor_core_splits_supported()) GTEST_SKIP() << "the stream kernel needs sm_90";
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const int64_t N = int64_t(16) * 2 * sms * 3 + 37, K = 2176;  // 34 chunks: stages of 16, 16, 2
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  for (const std::string format : {"nvfp4", "nvfp4-razer", "mxfp4", "fp4-g128", "razer-fp4-g128", "int4-g128", "nf4"}) {
    const std::vector<float> w = random_weights(N, K, g);
    const PackedTensor t = quantize(format, w.data(), N, K);
    const std::vector<float> wq = dequantize(t);
    const DeviceWeight dw = upload(t, format);
    for (const int M : {3, 16}) {
      const std::vector<uint16_t> x = random_x(M, K, g);
      const Reference ref = reference(x, wq, M, N, K, 0);
      GpuBuffer<uint16_t> dx(x), dy{size_t(M * N)};
      for (const int rb : {1, 2}) {
        LinearOptions o;
        o.engine = Engine::tensor_stream, o.row_blocks = rb;
        ASSERT_TRUE(stream_kernel_fits(dw, M, rb));
        dy.poison();
        linear(dx.get(), M, dw, dy.get(), nullptr, o);
        expect_close(dy.host(), ref,
                     format + " N=" + std::to_string(N) + " M=" + std::to_string(M) + " rb" + std::to_string(rb),
                     format == "nf4" ? 0x1p-11 : 0.0);
      }
    }
  }
}

// The output layer's FP16 GEMV with FP32 outputs (linear_fp16_f32out): odd N, fresh random W and
// x, FP32 sums against float64 (no fp16 rounding of the outputs), and its argument checks.
TEST(GemvFp16F32Out, MatchesFloat64Reference) {
  std::mt19937_64 g(std::random_device{}());
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1001, 4104}, {37, 8}, {4099, 512}}) {
    std::vector<float> w = random_weights(N, K, g);
    std::vector<uint16_t> wh(w.size());
    for (size_t i = 0; i < w.size(); ++i) wh[i] = float_to_half(w[i]), w[i] = half_to_float(wh[i]);
    const std::vector<uint16_t> x = random_x(1, K, g);
    const Reference ref = reference(x, w, 1, N, K, 0);
    GpuBuffer<uint16_t> dx(x), dw(wh);
    GpuBuffer<float> dy{size_t(N)};
    dy.poison();
    linear_fp16_f32out(dx.get(), dw.get(), N, K, dy.get(), nullptr);
    const std::vector<float> y = dy.host();
    int bad = 0;
    for (int64_t n = 0; n < N; ++n) {
      const double tol = 1e-5 * ref.mag[size_t(n)] + 1e-12;
      if (!std::isfinite(y[size_t(n)]) || std::fabs(double(y[size_t(n)]) - ref.y[size_t(n)]) > tol)
        if (++bad <= 5)
          ADD_FAILURE() << N << "x" << K << ": y[" << n << "] = " << y[size_t(n)] << ", reference " << ref.y[size_t(n)];
    }
    EXPECT_EQ(bad, 0) << N << "x" << K;
  }
  GpuBuffer<uint16_t> x(std::vector<uint16_t>(16)), w(std::vector<uint16_t>(16 * 12));
  GpuBuffer<float> y{16};
  EXPECT_THROW(linear_fp16_f32out(x.get(), w.get(), 16, 12, y.get(), nullptr), Error);  // K % 8
  EXPECT_THROW(linear_fp16_f32out(x.get(), w.get(), 0, 8, y.get(), nullptr), Error);
  EXPECT_THROW(linear_fp16_f32out(nullptr, w.get(), 16, 8, y.get(), nullptr), Error);
}

// The RaZeR formats' CUDA-core GEMV looks codes up in byte tables when both special values have a
// zero fp16 low byte (5 and 8: at most three significant bits) and decodes by bit placement with a
// select otherwise (4.5 = 1.001b x 4, 9.5 = 1.0011b x 8): both against the reference, with the
// special-value code in use.
TEST(GemvRazer, TableAndBitPlacementSpecialValues) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int64_t N = 45, K = 640;
  for (const std::string format : {"nvfp4-razer", "razer-fp4-g128"})
    for (const auto& [a, b] : {std::pair{5.0f, 8.0f}, std::pair{4.5f, 9.5f}}) {
      SCOPED_TRACE(format + " sv " + std::to_string(a) + " / " + std::to_string(b));
      QuantOptions o;
      o.sv_a = a, o.sv_b = b;
      const PackedTensor t = quantize(format, random_weights(N, K, g).data(), N, K, o);
      ASSERT_EQ(t.sv_a, a);
      ASSERT_GT(fp4_special_codes(t), 0);
      const std::vector<float> wq = dequantize(t);
      const DeviceWeight dw = upload(t, format);
      LinearOptions cc;
      cc.engine = Engine::cuda_cores;
      for (int M : {1, 3}) {
        const std::vector<uint16_t> x = random_x(M, K, g);
        const Reference ref = reference(x, wq, M, N, K, half_run(format));
        GpuBuffer<uint16_t> dx(x), dy(size_t(M * N));
        dy.poison();
        linear(dx.get(), M, dw, dy.get(), nullptr, cc);
        expect_close(dy.host(), ref, "M=" + std::to_string(M), 0.0, true);
      }
    }
}

// MXFP4's tile layout scales in fp16 relative to the tensor's largest block scale, exact while the
// blocks with a nonzero code span at most 2^24: at exactly 2^24 the tensor cores must match the
// reference (all-zero blocks with any exponent, 0 and 254 here, do not count), at 2^25 the tensor
// has no tile layout and runs on CUDA cores, and a NaN exponent in a nonzero block is refused.
TEST(GemvMxfp4Tiles, ScaleSpanDecidesTheTensorCorePath) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  const int64_t N = 40, K = 256, G = K / 32;
  PackedTensor t = quantize("mxfp4", random_weights(N, K, g).data(), N, K);  // row 1 all zero
  const int hi = 120;  // scales up to 2^-7: the outputs stay inside fp16
  for (int64_t i = 0; i < N * G; ++i) t.scales[size_t(i)] = uint8_t(hi - int(i % 25));  // 2^-24 .. 1 of the largest
  for (int64_t b = 0; b < G; ++b) t.scales[size_t(G + b)] = b % 2 ? 254 : 0;
  for (int span : {24, 25}) {
    SCOPED_TRACE("span 2^" + std::to_string(span));
    t.scales[3] = uint8_t(hi - span);
    const std::vector<float> wq = dequantize(t);
    const DeviceWeight dw = upload(t, "mx");
    EXPECT_EQ(dw.qweight_mma != nullptr, span <= 24);
    LinearOptions tc;
    tc.engine = Engine::tensor_cores;
    for (int M : {2, 9, 16}) {
      const std::vector<uint16_t> x = random_x(M, K, g);
      const Reference ref = reference(x, wq, M, N, K, half_run("mxfp4"));
      GpuBuffer<uint16_t> dx(x), dy(size_t(M * N));
      if (span <= 24) {
        dy.poison();
        linear(dx.get(), M, dw, dy.get(), nullptr, tc);
        expect_close(dy.host(), ref, "tensor cores M=" + std::to_string(M), 0.0);
      } else {
        EXPECT_THROW(linear(dx.get(), M, dw, dy.get(), nullptr, tc), Error);
      }
      dy.poison();
      linear(dx.get(), M, dw, dy.get(), nullptr);
      expect_close(dy.host(), ref, "dispatcher's choice M=" + std::to_string(M), 0.0, true);
    }
  }
  t.scales[5] = 255;
  EXPECT_THROW(upload(t, "mx"), Error);
}

TEST(GemvErrors, BadArgumentsThrowNibbleError) {
  std::vector<float> w(64 * 128, 0.5f);
  const DeviceWeight dw = upload(quantize("nvfp4", w.data(), 64, 128), "w");
  GpuBuffer<uint16_t> x(16 * 128), y(17 * 64);
  EXPECT_THROW(linear(x.get(), 0, dw, y.get(), nullptr), Error);
  EXPECT_THROW(linear(x.get(), 17, dw, y.get(), nullptr), Error);
  LinearOptions o;
  o.rows_per_warp = 3;
  EXPECT_THROW(linear(x.get(), 1, dw, y.get(), nullptr, o), Error);
  o.rows_per_warp = 0;
  for (int ks : {-1, 3, 16}) {
    o.k_splits = ks;
    EXPECT_THROW(linear(x.get(), 1, dw, y.get(), nullptr, o), Error);
  }
  o.k_splits = 0;
  for (int rb : {-1, 3, 8}) {
    o.row_blocks = rb;
    EXPECT_THROW(linear(x.get(), 4, dw, y.get(), nullptr, o), Error);
  }
  EXPECT_THROW(upload(quantize("bf16", w.data(), 64, 128), "w"), Error);  // no kernel (the runtime converts)
  std::vector<float> w12(8 * 12, 0.5f);
  EXPECT_THROW(upload(quantize("fp16", w12.data(), 8, 12), "w"), Error);  // fp16: K not a multiple of 8
  PackedTensor t = quantize("nvfp4", w.data(), 64, 128);
  t.scales.pop_back();
  EXPECT_THROW(upload(t, "w"), Error);  // plane size mismatch
  std::vector<float> w40(8 * 48, 0.5f);
  EXPECT_THROW(upload(quantize("nvfp4", w40.data(), 8, 48), "w"), Error);  // K not a multiple of 32
}

// Split K over a cluster: the parts' sums meet in a fixed order, so every run gives the same bits
// (whichever CTA finishes first); elsewhere than sm_90 the split is refused.
TEST(GemvClusterSplits, SameBitsEveryRun) {
  std::mt19937_64 g(std::random_device{}());
  const int64_t N = 300, K = 4096;
  const std::vector<float> w = random_weights(N, K, g);
  const DeviceWeight dw = upload(quantize("nvfp4", w.data(), N, K), "w");
  LinearOptions o;
  o.engine = Engine::tensor_cores, o.row_blocks = 2, o.k_splits = 4;
  for (int M : {3, 16}) {
    GpuBuffer<uint16_t> dx(random_x(M, K, g)), dy(size_t(M * N));
    if (!tensor_core_splits_supported()) {
      EXPECT_THROW(linear(dx.get(), M, dw, dy.get(), nullptr, o), Error);
      continue;
    }
    linear(dx.get(), M, dw, dy.get(), nullptr, o);
    const std::vector<uint16_t> first = dy.host();
    for (int run = 0; run < 5; ++run) {
      dy.poison();
      linear(dx.get(), M, dw, dy.get(), nullptr, o);
      EXPECT_EQ(dy.host(), first) << "M=" << M << " run " << run;
    }
  }
}

TEST(GemvTuning, TableRoundTripsKSplitsAndRejectsBadValues) {
  const auto path = std::filesystem::temp_directory_path() / ("nibble_tuning_" + std::to_string(std::random_device{}()) + ".json");
  TuningEntry e{"nvfp4", 4096, 1000, 1, {}};
  e.choice = {2, Fp4Decode::lut, Engine::cuda_cores, 4, 4};
  save_tuning_table(path.string(), {e});
  load_tuning_table(path.string());
  const TunedChoice got = tuned_choice("nvfp4", 4096, 1000, 1);
  EXPECT_EQ(got.k_splits, 4);
  EXPECT_EQ(got.row_blocks, 4);
  EXPECT_EQ(got.rows_per_warp, 2);
  EXPECT_EQ(got.fp4_decode, Fp4Decode::lut);
  // a table whose entry has a bad value is refused with an error naming the field
  auto expect_refused = [&](const std::string& entry, const std::string& field) {
    std::ofstream(path) << "[" << entry << "]";
    try {
      load_tuning_table(path.string());
      ADD_FAILURE() << "accepted: " << entry;
    } catch (const Error& ex) {
      EXPECT_NE(std::string(ex.what()).find(field), std::string::npos) << ex.what();
    }
  };
  expect_refused(R"({"format": "nvfp4", "K": 64, "N": 8, "M": 1, "engine": "cuda_cores", "rows_per_warp": 2,
                     "fp4_decode": "bits", "k_splits": 3})",
                 "k_splits");
  expect_refused(R"({"format": "nvfp4", "K": 64, "N": 8, "M": 2, "engine": "tensor_cores", "rows_per_warp": 2,
                     "fp4_decode": "bits", "row_blocks": 3})",
                 "row_blocks");
  set_tuning_table({});
  std::filesystem::remove(path);
}

TEST(GemvTuning, HeuristicSplitsKOnlyWhereRowsAreLong) {
  for (int64_t K : {128, 4096, 14336, 25600})
    for (int64_t N : {37, 4096, 28672})
      for (int M : {1, 4, 16}) {
        const TunedChoice c = default_choice("nvfp4", K, N, M);
        EXPECT_TRUE(valid_k_splits(c.k_splits));
        EXPECT_LE(2048 * int64_t(c.k_splits), std::max<int64_t>(K, 2048)) << K << " " << N << " " << M;
      }
  EXPECT_EQ(default_choice("nvfp4", 4096, 28672, 1).k_splits, 1);  // enough CTAs already
  EXPECT_GT(default_choice("nvfp4", 14336, 4096, 1).k_splits, 1);  // down projection: split K
  // tensor cores at 16 rows: gate_up fills the SMs alone, down's 128 CTAs do not
  EXPECT_EQ(default_choice("nvfp4", 4096, 28672, 16).k_splits, 1);
  EXPECT_GT(default_choice("nvfp4", 14336, 4096, 16).k_splits, 1);
}

TEST(GemvTuning, HeuristicEngines) {
  EXPECT_EQ(default_choice("nvfp4", 4096, 4096, 1).engine, Engine::cuda_cores);
  EXPECT_EQ(default_choice("nvfp4", 4096, 4096, 2).engine, Engine::tensor_cores);
  EXPECT_EQ(default_choice("nf4", 4096, 4096, 1).engine, Engine::tensor_cores);  // faster there from one row
  EXPECT_EQ(default_choice("nf4", 4128, 4096, 1).engine, Engine::cuda_cores);  // no tile layout: K % 64
  EXPECT_EQ(default_choice("int4-g128", 14336, 4096, 1).engine, Engine::tensor_cores);  // long rows at one row
  EXPECT_EQ(default_choice("int4-g128", 4096, 28672, 1).engine, Engine::cuda_cores);
  EXPECT_EQ(default_choice("razer-fp3-g128", 4096, 4096, 4).engine, Engine::cuda_cores);  // no tensor-core kernel
}

// At 9-16 tokens: one row block where two leave more CTA slots empty, and for fp4-g128 / nvfp4 where
// both fill them (what `nibble tune --m 16` picked on the H200, which has 132 SMs).
TEST(GemvTuning, HeuristicRowBlocksAtSixteenTokens) {
  if (heuristic_sm_count() != 132)
    GTEST_SKIP() << "the expected picks are for 132 SMs, this GPU has " << heuristic_sm_count();
  for (const char* f : {"int4-g128", "nvfp4", "mxfp4", "fp4-g128", "nf4", "nvfp4-razer", "razer-fp4-g128"}) {
    const bool one_where_full = std::string_view(f) == "fp4-g128" || std::string_view(f) == "nvfp4";
    EXPECT_EQ(default_choice(f, 4096, 6144, 16).row_blocks, 1) << f;  // q/k/v: 384 CTAs, not 192
    const TunedChoice o = default_choice(f, 4096, 4096, 16);
    EXPECT_EQ(o.row_blocks, 2) << f;  // o: 128 CTAs x 2 splits fill more than 256 unsplit
    EXPECT_EQ(o.k_splits, 2) << f;
    EXPECT_EQ(default_choice(f, 4096, 28672, 16).row_blocks, one_where_full ? 1 : 2) << f;
    EXPECT_EQ(default_choice(f, 14336, 4096, 16).row_blocks, 2) << f;  // long rows
    EXPECT_EQ(default_choice(f, 4096, 6144, 8).row_blocks, 2) << f;   // up to 8 tokens unchanged
  }
}

}  // namespace
}  // namespace nibble::cuda

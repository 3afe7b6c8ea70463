// The quantized KV cache on the CPU (LoadOptions::kv_cache): each K and V row as the format stores
// it, against the float64 reference forward pass that quantizes the same head vectors with the
// format library. The Session's K and V come from FP32 arithmetic, the reference's from float64:
// about one run in fifty puts a value within that difference of a rounding boundary, and the two
// then quantize it one code apart (a 4-bit code moves logits by up to ~0.1). So each case draws up
// to three models and needs one whose logits match within 2e-3; a wrong quantizer misses on all
// three. Every model also checks that the format moved the logits by far more than that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/tiny_model.h"
#include "nibble/error.h"
#include "nibble/format.h"
#include "nibble/model.h"

namespace nibble {
namespace {

test::HeadQuant quantizer(const std::string& format) {
  return [format](double* x, size_t n) {
    const FormatInfo& f = find_format(format);
    std::vector<float> row(x, x + n);
    const PackedTensor p = f.quantize(row.data(), 1, int64_t(n), {});
    f.dequantize_rows(p, 0, 1, row.data());
    std::copy(row.begin(), row.end(), x);
  };
}

double max_rel_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double m = 0;
  for (size_t i = 0; i < got.size(); ++i) m = std::max(m, std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i])));
  return m;
}

void check_kv(const test::TinySpec& spec, const std::string& kv) {
  constexpr double kTol = 2e-3;
  std::string errs;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const unsigned seed = std::random_device{}();
    std::mt19937 gen(seed);
    const test::TinyModel tm = test::make_tiny_model(spec, gen);
    std::uniform_int_distribution<int> u(0, spec.vocab - 1);
    std::vector<int> ids(12);
    for (int& i : ids) i = u(gen);
    LoadOptions o = test::tiny_options();
    o.kv_cache = kv;
    const auto m = Model::load(tm.dir, o);
    Session s(*m, 16);
    const std::vector<float> got = s.forward(std::vector<int32_t>(ids.begin(), ids.end()), true);
    const double err = max_rel_diff(got, test::reference_forward(spec, tm.tensors, ids, quantizer(kv)));
    const double moved = max_rel_diff(got, test::reference_forward(spec, tm.tensors, ids));
    EXPECT_GT(moved, 10 * kTol) << kv << " seed " << seed << ": the KV-cache format moved the logits by only " << moved;
    errs.append(" ").append(std::to_string(err)).append(" (seed ").append(std::to_string(seed)).append(")");
    if (err < kTol) return;
  }
  ADD_FAILURE() << kv << ": no model's logits matched the quantized reference within " << kTol << ":" << errs;
}

TEST(KvCache, Fp8E4m3MatchesTheQuantizedReference) { check_kv({}, "fp8-e4m3"); }

TEST(KvCache, FourBitFormatsMatchTheQuantizedReference) {
  test::TinySpec s;
  s.head_dim = 32;  // blocks of 16 / 32 fit; razer-fp4-g128 and int4-g128 take one block of 32
  for (const char* kv : {"nvfp4", "mxfp4", "razer-fp4-g128", "int4-g128"}) check_kv(s, kv);
}

TEST(KvCache, Fp32IsTheUnquantizedCache) {
  std::mt19937 gen(std::random_device{}());
  const test::TinyModel tm = test::make_tiny_model({}, gen);
  LoadOptions o = test::tiny_options();
  const auto plain = Model::load(tm.dir, o);
  o.kv_cache = "fp32";
  const auto fp32 = Model::load(tm.dir, o);
  Session a(*plain, 8), b(*fp32, 8);
  const std::vector<int32_t> ids = {1, 5, 9, 3};
  EXPECT_EQ(a.forward(ids, true), b.forward(ids, true));
}

TEST(KvCache, FormatsThatCannotHoldTheRowsAreRejected) {
  std::mt19937 gen(std::random_device{}());
  const test::TinyModel tm = test::make_tiny_model({}, gen);  // head_dim 8
  LoadOptions o = test::tiny_options();
  auto error_of = [&](const std::string& kv) {
    o.kv_cache = kv;
    try {
      Model::load(tm.dir, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_of("int4-g128").find("KV-cache format \"int4-g128\" for head_dim 8"), std::string::npos)
      << error_of("int4-g128");  // groups of a multiple of 32
  EXPECT_NE(error_of("nestedfp").find("NestedFP"), std::string::npos);
  EXPECT_NE(error_of("fp5-bogus").find("KV-cache format: unknown number format 'fp5-bogus'"), std::string::npos);
}

}  // namespace
}  // namespace nibble

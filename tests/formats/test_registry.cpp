// The registry: names, metadata, and how every format treats bad input and edge shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "nibble/error.h"
#include "nibble/format.h"

namespace {

bool mentions(const nibble::Error& e, const std::string& s) {
  return std::string(e.what()).find(s) != std::string::npos;
}

}  // namespace

TEST(Registry, NamesAreUniqueAndFindable) {
  std::set<std::string> names;
  for (const nibble::FormatInfo& f : nibble::all_formats()) {
    EXPECT_TRUE(names.insert(std::string(f.name)).second) << f.name;
    EXPECT_EQ(&nibble::find_format(f.name), &f);
    EXPECT_NE(f.quantize, nullptr);
    EXPECT_NE(f.dequantize_rows, nullptr);
    EXPECT_FALSE(f.description.empty());
  }
  for (const char* want : {"fp32", "fp16", "bf16", "fp8-e4m3", "nestedfp", "nestedfp8", "int4-g128", "nf4",
                           "mxfp4", "nvfp4", "nvfp4-4over6", "nvfp4-razer", "nvfp4-razer-act", "fp4-g128",
                           "razer-fp4-g128", "razer-fp3-g128"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  try {
    nibble::find_format("fp5");
    ADD_FAILURE();
  } catch (const nibble::Error& e) {
    EXPECT_TRUE(mentions(e, "fp5") && mentions(e, "nvfp4-razer")) << e.what();
  }
}

TEST(Registry, MetadataMatchesTheContract) {
  struct Row {
    const char* name;
    double bits;
    int block;
    const char* scale_dtype;
    bool act;
  };
  const Row rows[] = {{"fp8-e4m3", 8, 0, "F32", true},        {"nestedfp", 16, 0, "", false},
                      {"nestedfp8", 8, 0, "", false},         {"int4-g128", 4.15625, 128, "F16", false},
                      {"nf4", 4.5, 64, "F32", false},          {"mxfp4", 4.25, 32, "U8", true},
                      {"nvfp4", 4.5, 16, "F8_E4M3", true},     {"nvfp4-4over6", 4.5, 16, "F8_E4M3", true},
                      {"nvfp4-razer", 4.5, 16, "U8", false},   {"nvfp4-razer-act", 4.5, 16, "U8", true},
                      {"fp4-g128", 4.125, 128, "F16", false},  {"razer-fp4-g128", 4.125, 128, "U16", false},
                      {"razer-fp3-g128", 3.125, 128, "U16", false}};
  for (const Row& r : rows) {
    const nibble::FormatInfo& f = nibble::find_format(r.name);
    EXPECT_EQ(f.bits_per_weight, r.bits) << r.name;
    EXPECT_EQ(f.default_block, r.block) << r.name;
    EXPECT_EQ(f.scale_dtype, r.scale_dtype) << r.name;
    EXPECT_EQ(f.for_activations, r.act) << r.name;
  }
  EXPECT_EQ(nibble::find_format("nestedfp").aux_name, "lower");
  EXPECT_EQ(nibble::find_format("int4-g128").aux_name, "qzeros");
}

TEST(Registry, EveryFormatRejectsNaNAndInfNamingTheTensor) {
  for (const nibble::FormatInfo& f : nibble::all_formats()) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> x(3 * 40, 0.25f);
      x[size_t(2 * 40 + 17)] = bad;
      nibble::QuantOptions opt;
      opt.name = "model.layers.7.self_attn.q_proj.weight";
      try {
        f.quantize(x.data(), 3, 40, opt);
        ADD_FAILURE() << f.name << " accepted " << bad;
      } catch (const nibble::Error& e) {
        EXPECT_TRUE(mentions(e, "model.layers.7.self_attn.q_proj.weight")) << e.what();
        EXPECT_TRUE(mentions(e, "[2, 17]")) << e.what();
      }
    }
  }
}

TEST(Registry, EmptyTensorsAndZeroTensors) {
  for (const nibble::FormatInfo& f : nibble::all_formats()) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{0, 0}, {0, 33}, {4, 0}}) {
      nibble::PackedTensor t = f.quantize(nullptr, rows, cols, {});
      EXPECT_TRUE(nibble::dequantize(t).empty()) << f.name;
    }
    std::vector<float> zeros(3 * 70, 0.0f);
    nibble::PackedTensor t = f.quantize(zeros.data(), 3, 70, {});
    for (float v : nibble::dequantize(t)) ASSERT_EQ(v, 0.0f) << f.name;
  }
}

TEST(Registry, BadPackedTensorsAndRowRangesAreErrors) {
  for (const nibble::FormatInfo& f : nibble::all_formats()) {
    std::vector<float> x(2 * 64, 0.5f), out(2 * 64);
    nibble::PackedTensor t = f.quantize(x.data(), 2, 64, {});
    EXPECT_THROW(f.dequantize_rows(t, 1, 2, out.data()), nibble::Error) << f.name;
    EXPECT_THROW(f.dequantize_rows(t, -1, 1, out.data()), nibble::Error) << f.name;
    nibble::PackedTensor cut = t;
    cut.qweight.pop_back();
    EXPECT_THROW(f.dequantize_rows(cut, 0, 1, out.data()), nibble::Error) << f.name;
    nibble::PackedTensor other = t;
    other.format = f.name == "fp32" ? "fp16" : "fp32";
    EXPECT_THROW(f.dequantize_rows(other, 0, 1, out.data()), nibble::Error) << f.name;
  }
}

TEST(Registry, BadOptionsAreErrorsNamingTheTensor) {
  std::vector<float> x(256, 0.5f);
  nibble::QuantOptions opt;
  opt.name = "w_bad";
  auto expect_error = [&](const char* format, nibble::QuantOptions o) {
    try {
      nibble::quantize(format, x.data(), 2, 128, o);
      ADD_FAILURE() << format;
    } catch (const nibble::Error& e) {
      EXPECT_TRUE(mentions(e, "w_bad")) << e.what();
    }
  };
  for (int b : {16, 48, 8192}) {
    opt.block = b;
    expect_error("nf4", opt);
  }
  opt.block = 64;
  expect_error("nvfp4", opt);
  expect_error("mxfp4", opt);
  opt.block = 40;
  expect_error("razer-fp3-g128", opt);
  opt.block = 0;
  for (float sv : {2.0f, 9.75f, 5.25f, -5.0f, 10.0f}) {
    opt.sv_a = sv;
    expect_error("nvfp4-razer", opt);
    expect_error("razer-fp4-g128", opt);
    expect_error("nvfp4-razer-act", opt);
  }
  EXPECT_THROW(nibble::quantize("fp4", x.data(), 2, 128), nibble::Error);
  float big = 1e6f;
  EXPECT_THROW(nibble::quantize("fp16", &big, 1, 1), nibble::Error);
}

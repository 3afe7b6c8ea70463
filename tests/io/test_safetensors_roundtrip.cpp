// Writer -> reader round trips for every dtype on fresh random data, layout checks, and
// TensorView::to_float against a separately written float64 decoder.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io_test_util.h"
#include "nibble/safetensors.h"

using io_test::expect_error;
using io_test::TempDir;
using namespace nibble;

namespace {

const DType kAll[] = {DType::F64,     DType::F32, DType::F16, DType::BF16, DType::F8_E4M3,
                      DType::F8_E5M2, DType::I64, DType::I32, DType::I16,  DType::I8,
                      DType::U8,      DType::BOOL, DType::U16, DType::U32, DType::U64};

// float64 value of one element, decoded from the bit fields (independent of half.h).
double reference_value(DType t, const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  switch (t) {
    case DType::F64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::BF16: {
      int s = h >> 15, e = (h >> 7) & 0xFF, m = h & 0x7F;
      double v = e == 0 ? std::ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : std::ldexp(128 + m, e - 134);
      return s ? -v : v;
    }
    case DType::F16: {
      int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
      double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
      return s ? -v : v;
    }
    default:
      return NAN;
  }
}

std::vector<int64_t> random_shape(io_test::Rng& rng) {
  std::vector<int64_t> shape(size_t(rng.uniform(0, 3)));
  for (auto& d : shape) d = rng.uniform(0, 9);
  return shape;
}

}  // namespace

TEST(SafetensorsRoundTrip, EveryDtypeRandomShapes) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  struct Expect {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Expect> expect;
  SafetensorsWriter w;
  for (int rep = 0; rep < 3; ++rep) {
    for (DType t : kAll) {
      const std::string name = std::string("t.") + dtype_name(t) + "." + std::to_string(rep);
      auto shape = random_shape(rng);
      size_t n = 1;
      for (auto d : shape) n *= size_t(d);
      auto bytes = rng.bytes(n * dtype_size(t));
      w.add(name, t, shape, bytes);
      expect[name] = {t, shape, bytes};
    }
  }
  const std::string seed = std::to_string(rng.seed());
  w.set_metadata("format", "pt");
  w.set_metadata("seed", seed);
  const auto p = dir / "rt.safetensors";
  w.write(p);

  auto f = SafetensorsFile::open(p);
  ASSERT_EQ(f->tensors().size(), expect.size());
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("seed"), seed);
  {
    uint64_t n;
    std::ifstream in(p, std::ios::binary);
    in.read(reinterpret_cast<char*>(&n), 8);
    EXPECT_EQ((8 + n) % 8, 0u) << "data section must start 8-aligned";
  }
  for (const auto& [name, e] : expect) {
    const TensorView& v = f->at(name);
    EXPECT_EQ(v.dtype, e.dtype) << name;
    EXPECT_EQ(v.shape, e.shape) << name;
    ASSERT_EQ(v.nbytes, e.bytes.size()) << name;
    EXPECT_TRUE(std::equal(e.bytes.begin(), e.bytes.end(), v.data)) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype), 0u) << name;
  }
  EXPECT_EQ(f->find("absent"), nullptr);
  expect_error([&] { f->at("absent"); }, {p.string(), "absent"});
}

TEST(SafetensorsRoundTrip, ToFloatMatchesReference) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  SafetensorsWriter w;
  const DType floats[] = {DType::F64, DType::F32, DType::F16, DType::BF16};
  for (DType t : floats) w.add(dtype_name(t), t, {7, 13}, rng.bytes(91 * dtype_size(t)));
  w.add("ints", DType::I32, {3}, rng.bytes(12));
  w.write(dir / "f.safetensors");
  auto f = SafetensorsFile::open(dir / "f.safetensors");
  for (DType t : floats) {
    const TensorView& v = f->at(dtype_name(t));
    auto got = v.to_float();
    ASSERT_EQ(got.size(), 91u);
    for (size_t i = 0; i < got.size(); ++i) {
      const double ref = reference_value(t, v.data + i * dtype_size(t));
      if (std::isnan(ref)) {
        EXPECT_TRUE(std::isnan(got[i])) << dtype_name(t) << " " << i;
      } else {
        EXPECT_EQ(double(got[i]), double(float(ref))) << dtype_name(t) << " " << i;
      }
    }
  }
  expect_error([&] { f->at("ints").to_float(); }, {"ints", "I32", "f.safetensors"});
}

TEST(SafetensorsRoundTrip, AddF32AndEmptyFile) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  std::vector<float> x(30);
  for (auto& v : x) v = rng.normal();
  SafetensorsWriter w;
  w.add_f32("x", {5, 6}, x.data());
  w.write(dir / "x.safetensors");
  EXPECT_EQ(SafetensorsFile::open(dir / "x.safetensors")->at("x").to_float(), x);

  SafetensorsWriter empty;
  empty.write(dir / "empty.safetensors");
  auto f = SafetensorsFile::open(dir / "empty.safetensors");
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_TRUE(f->metadata().empty());
}

TEST(SafetensorsRoundTrip, WriterRejectsBadInput) {
  SafetensorsWriter w;
  w.add("a", DType::U8, {2}, {1, 2});
  expect_error([&] { w.add("a", DType::U8, {2}, {1, 2}); }, {"\"a\"", "twice"});
  expect_error([&] { w.add("b", DType::F32, {2}, {1, 2}); }, {"\"b\"", "8 bytes"});
  expect_error([&] { w.add("c", DType::F32, {-1}, {}); }, {"\"c\"", "shape"});
  expect_error([&] { w.add("__metadata__", DType::U8, {0}, {}); }, {"__metadata__"});
  TempDir dir;
  const auto bad = dir / "no" / "such" / "dir.safetensors";
  expect_error([&] { w.write(bad); }, {"cannot create"});
}

TEST(SafetensorsRoundTrip, WriteIsAtomicReplace) {
  TempDir dir;
  const auto p = dir / "m.safetensors";
  SafetensorsWriter a, b;
  a.add("old", DType::U8, {1}, {7});
  b.add("new", DType::U8, {1}, {9});
  a.write(p);
  auto old_file = SafetensorsFile::open(p);  // stays mapped and valid across the replace
  b.write(p);
  EXPECT_EQ(old_file->at("old").data[0], 7);
  auto f = SafetensorsFile::open(p);
  EXPECT_EQ(f->find("old"), nullptr);
  EXPECT_EQ(f->at("new").data[0], 9);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u) << "temporary file left behind";
}

// Each kind of malformed safetensors file is rejected with a nibble::Error naming the file and
// the tensor / field at fault.
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "nibble/safetensors.h"

using io_test::expect_error;
using io_test::TempDir;
using io_test::write_raw_safetensors;
using nibble::SafetensorsFile;

namespace {

// Opens DIR/bad.safetensors written from `header` + `data_bytes` and expects an error naming the
// file plus `parts`.
void expect_rejected(const std::string& header, size_t data_bytes,
                     std::vector<std::string> parts) {
  TempDir dir;
  const auto p = dir / "bad.safetensors";
  write_raw_safetensors(p, header, data_bytes);
  parts.push_back(p.string());
  expect_error([&] { SafetensorsFile::open(p); }, parts);
}

}  // namespace

TEST(SafetensorsMalformed, TruncatedFile) {
  TempDir dir;
  for (int n = 0; n < 8; ++n) {
    const auto p = dir / "short.safetensors";
    io_test::write_bytes(p, std::string(size_t(n), '\x01'));
    expect_error([&] { SafetensorsFile::open(p); }, {p.string(), "truncated"});
  }
}

TEST(SafetensorsMalformed, MissingFile) {
  TempDir dir;
  const auto p = dir / "absent.safetensors";
  expect_error([&] { SafetensorsFile::open(p); }, {p.string(), "cannot open"});
}

TEST(SafetensorsMalformed, HeaderLengthLargerThanFile) {
  TempDir dir;
  const auto p = dir / "long.safetensors";
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  uint64_t n = header.size() + 5;  // claims 5 bytes more than there are (data is 4 bytes)
  std::string bytes(reinterpret_cast<const char*>(&n), 8);
  bytes += header + std::string(4, '\0');
  io_test::write_bytes(p, bytes);
  expect_error([&] { SafetensorsFile::open(p); }, {p.string(), "header length", "past the end"});
}

TEST(SafetensorsMalformed, HeaderLengthAbsurd) {
  TempDir dir;
  const auto p = dir / "absurd.safetensors";
  for (uint64_t n : {uint64_t(100ull << 20) + 1, ~uint64_t(0), uint64_t(1) << 63}) {
    std::string bytes(reinterpret_cast<const char*>(&n), 8);
    bytes += "{}";
    io_test::write_bytes(p, bytes);
    expect_error([&] { SafetensorsFile::open(p); }, {p.string(), "100 MB"});
  }
}

TEST(SafetensorsMalformed, BadJson) {
  expect_rejected(R"({"a":{"dtype":"F32",)", 0, {"not valid JSON"});
  expect_rejected("\xff\xfe garbage", 0, {"not valid JSON"});
}

TEST(SafetensorsMalformed, JsonNotAnObject) {
  expect_rejected("[1,2,3]", 0, {"not a JSON object"});
  expect_rejected("\"F32\"", 0, {"not a JSON object"});
}

TEST(SafetensorsMalformed, UnknownDtype) {
  expect_rejected(R"({"w.weight":{"dtype":"F12","shape":[2],"data_offsets":[0,4]}})", 4,
                  {"w.weight", "F12"});
  expect_rejected(R"({"w.weight":{"dtype":7,"shape":[2],"data_offsets":[0,4]}})", 4,
                  {"w.weight", "dtype"});
}

TEST(SafetensorsMalformed, MissingFields) {
  expect_rejected(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", 4, {"\"t\"", "dtype"});
  expect_rejected(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", 4, {"\"t\"", "shape"});
  expect_rejected(R"({"t":{"dtype":"F32","shape":[1]}})", 4, {"\"t\"", "data_offsets"});
  expect_rejected(R"({"t":[1,2]})", 4, {"\"t\"", "object"});
}

TEST(SafetensorsMalformed, ShapeBytesMismatch) {
  expect_rejected(R"({"emb":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24,
                  {"emb", "24", "20"});
  expect_rejected(R"({"emb":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", 8,
                  {"emb", "6 bytes"});
}

TEST(SafetensorsMalformed, OffsetsPastTheEnd) {
  expect_rejected(R"({"x":{"dtype":"U8","shape":[9],"data_offsets":[0,9]}})", 8,
                  {"\"x\"", "past the data section"});
  expect_rejected(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[8,4]}})", 8,
                  {"\"x\"", "begin after end"});
  expect_rejected(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", 8,
                  {"\"x\"", "data_offsets"});
}

TEST(SafetensorsMalformed, OverlappingTensors) {
  expect_rejected(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  12, {"\"a\"", "\"b\"", "overlap"});
  // identical ranges overlap too
  expect_rejected(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[1,4]},)"
                  R"("b":{"dtype":"I8","shape":[3],"data_offsets":[1,4]}})",
                  4, {"overlap"});
}

TEST(SafetensorsMalformed, NegativeOrHugeShape) {
  expect_rejected(R"({"neg":{"dtype":"F32","shape":[-2],"data_offsets":[0,0]}})", 0,
                  {"neg", "shape"});
  expect_rejected(R"({"frac":{"dtype":"F32","shape":[2.5],"data_offsets":[0,0]}})", 0,
                  {"frac", "shape"});
  expect_rejected(R"({"big":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})",
                  0, {"big", "overflow"});
}

TEST(SafetensorsMalformed, BadMetadata) {
  expect_rejected(R"({"__metadata__":{"format":1}})", 0, {"__metadata__", "format"});
  expect_rejected(R"({"__metadata__":[1]})", 0, {"__metadata__"});
}

TEST(SafetensorsMalformed, FuzzedHeadersNeverCrash) {
  // Random single-byte corruptions of a valid header: open either succeeds with in-bounds views or
  // throws nibble::Error; nothing else (ASan/UBSan watch the rest).
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  const std::string header = R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2,2],)"
                             R"("data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";
  TempDir dir;
  const auto p = dir / "fuzz.safetensors";
  for (int i = 0; i < 300; ++i) {
    std::string h = header;
    h[size_t(rng.uniform(0, int(h.size()) - 1))] = char(rng.uniform(0, 255));
    write_raw_safetensors(p, h, 24);
    try {
      auto f = SafetensorsFile::open(p);
      for (const auto& [name, v] : f->tensors()) {
        EXPECT_LE(v.nbytes, 24u);
        EXPECT_EQ(size_t(v.numel()) * nibble::dtype_size(v.dtype), v.nbytes);
      }
    } catch (const nibble::Error& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  }
}

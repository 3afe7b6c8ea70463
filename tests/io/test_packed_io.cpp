// PackedTensor serialization: round trips of a hand-made tensor of a toy format (from a file, a
// model directory and a sharded directory), every registered format on fresh random data, and
// clear errors for each kind of mismatch.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "io_test_util.h"
#include "nibble/packed_io.h"

using io_test::expect_error;
using io_test::TempDir;
using namespace nibble;

namespace {

// A toy 4-bit format: block 8, one F16 scale per block, a 4-bit zero per block in aux "qzeros".
constexpr int kToyBlock = 8;
int64_t toy_blocks(int64_t cols) { return (cols + kToyBlock - 1) / kToyBlock; }

PackedTensor toy_quantize(const float*, int64_t rows, int64_t cols, const QuantOptions& opt) {
  if (opt.block != 0 && opt.block != kToyBlock) throw Error("toy4: block must be 8");
  PackedTensor t;
  t.format = "toy4";
  t.rows = rows;
  t.cols = cols;
  t.block = kToyBlock;
  t.qweight.resize(size_t(rows * ((cols + 1) / 2)));
  t.scales.resize(size_t(rows * toy_blocks(cols) * 2));
  t.aux.resize(size_t(rows * ((toy_blocks(cols) + 1) / 2)));
  return t;
}

const FormatInfo kToy{"toy4", "test format", kToyBlock, 6.5, "F16", "qzeros", false, toy_quantize, nullptr};

PackedTensor random_toy(io_test::Rng& rng) {
  const int64_t rows = rng.uniform(1, 7), cols = rng.uniform(1, 70);
  PackedTensor t = toy_quantize(nullptr, rows, cols, {});
  t.qweight = rng.bytes(t.qweight.size());
  t.scales = rng.bytes(t.scales.size());
  t.aux = rng.bytes(t.aux.size());
  t.global_scale = rng.normal();
  t.sv_a = float(rng.uniform(5, 19)) / 2;
  t.sv_b = float(rng.uniform(5, 19)) / 2;
  return t;
}

void expect_same(const PackedTensor& a, const PackedTensor& b) {
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.block, b.block);
  EXPECT_EQ(a.qweight, b.qweight);
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.aux, b.aux);
  EXPECT_EQ(std::memcmp(&a.global_scale, &b.global_scale, 4), 0);
  EXPECT_EQ(a.sv_a, b.sv_a);
  EXPECT_EQ(a.sv_b, b.sv_b);
}

}  // namespace

TEST(PackedIo, ToyRoundTripFileAndDirectory) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  const PackedTensor a = random_toy(rng), b = random_toy(rng);
  SafetensorsWriter w;
  write_packed(w, "model.layers.0.mlp.up_proj", a, kToy);
  write_packed(w, "model.layers.1.mlp.up_proj", b, kToy);
  w.write(dir / "model.safetensors");

  auto f = SafetensorsFile::open(dir / "model.safetensors");
  EXPECT_TRUE(has_packed(*f, "model.layers.0.mlp.up_proj"));
  EXPECT_FALSE(has_packed(*f, "model.layers.0.mlp.down_proj"));
  EXPECT_EQ(packed_format(*f, "model.layers.1.mlp.up_proj"), "toy4");
  const TensorView& q = f->at("model.layers.0.mlp.up_proj.qweight");
  EXPECT_EQ(q.dtype, DType::U8);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{a.rows, (a.cols + 1) / 2}));
  EXPECT_EQ(f->at("model.layers.0.mlp.up_proj.scales").dtype, DType::F16);
  EXPECT_EQ(f->at("model.layers.0.mlp.up_proj.scales").shape, (std::vector<int64_t>{a.rows, toy_blocks(a.cols)}));
  EXPECT_NE(f->find("model.layers.0.mlp.up_proj.qzeros"), nullptr);
  expect_same(read_packed(*f, "model.layers.0.mlp.up_proj", kToy), a);
  expect_same(read_packed(*f, "model.layers.1.mlp.up_proj", kToy), b);

  auto s = TensorStore::open_dir(dir.path());
  expect_same(read_packed(s, "model.layers.1.mlp.up_proj", kToy), b);
  // The registry does not know toy4: the error says so.
  expect_error([&] { read_packed(s, "model.layers.1.mlp.up_proj"); }, {"toy4"});
  expect_error([&] { read_packed(s, "model.layers.7.mlp.up_proj", kToy); },
               {dir.path().string(), "model.layers.7.mlp.up_proj.qweight"});
}

TEST(PackedIo, ShardedDirectoryUsesTheShardsMetadata) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  const PackedTensor a = random_toy(rng), b = random_toy(rng);
  SafetensorsWriter w1, w2;
  write_packed(w1, "a", a, kToy);
  write_packed(w2, "b", b, kToy);
  w1.write(dir / "s1.safetensors");
  w2.write(dir / "s2.safetensors");
  nlohmann::json map;
  for (const auto& [file, names] : {std::pair{"s1.safetensors", "a"}, std::pair{"s2.safetensors", "b"}})
    for (const char* part : {".qweight", ".scales", ".qzeros", ".global_scale", ".sv_pair"})
      map[std::string(names) + part] = file;
  io_test::write_text(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
  auto s = TensorStore::open_dir(dir.path());
  expect_same(read_packed(s, "a", kToy), a);
  expect_same(read_packed(s, "b", kToy), b);
}

TEST(PackedIo, EveryRegisteredFormatRoundTrips) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  const int64_t rows = rng.uniform(1, 4), cols = 256;
  std::vector<float> x(size_t(rows * cols));
  for (auto& v : x) v = 0.2f * rng.normal();
  std::map<std::string, PackedTensor> packed;
  SafetensorsWriter w;
  for (const FormatInfo& info : all_formats()) {
    SCOPED_TRACE(std::string(info.name));
    PackedTensor t = info.quantize(x.data(), rows, cols, {});
    const std::string name = "layer." + std::string(info.name);
    write_packed(w, name, t);
    packed[name] = std::move(t);
  }
  w.write(dir / "all.safetensors");
  auto f = SafetensorsFile::open(dir / "all.safetensors");
  for (const auto& [name, t] : packed) {
    SCOPED_TRACE(name);
    const PackedTensor back = read_packed(*f, name);
    expect_same(back, t);
    const auto d0 = dequantize(t), d1 = dequantize(back);
    ASSERT_EQ(d0.size(), d1.size());
    EXPECT_EQ(std::memcmp(d0.data(), d1.data(), d0.size() * 4), 0);
  }
}

TEST(PackedIo, WriterRejectsTensorsThatDoNotMatchTheFormat) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  SafetensorsWriter w;
  PackedTensor t = random_toy(rng);
  t.qweight.push_back(0);
  expect_error([&] { write_packed(w, "w", t, kToy); }, {"\"w\"", "qweight", "needs"});
  t = random_toy(rng);
  t.scales.resize(t.scales.size() - 2);
  expect_error([&] { write_packed(w, "w", t, kToy); }, {"\"w\"", "scales"});
  t = random_toy(rng);
  t.aux.clear();
  expect_error([&] { write_packed(w, "w", t, kToy); }, {"\"w\"", "qzeros"});
  t = random_toy(rng);
  t.format = "nvfp4";
  expect_error([&] { write_packed(w, "w", t, kToy); }, {"\"w\"", "nvfp4"});
  t = random_toy(rng);
  t.block = 16;
  expect_error([&] { write_packed(w, "w", t, kToy); }, {"\"w\"", "block 16", "block must be 8"});
  t = random_toy(rng);
  t.global_scale = NAN;
  expect_error([&] { write_packed(w, "w", t, kToy); }, {"\"w\"", "finite"});
}

TEST(PackedIo, ReaderRejectsMismatchedFiles) {
  io_test::Rng rng;
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  TempDir dir;
  const auto p = dir / "bad.safetensors";
  const PackedTensor t = random_toy(rng);
  const int64_t R = t.rows, Q = (t.cols + 1) / 2, B = toy_blocks(t.cols);
  // Builds a file piece by piece, leaving out or altering one piece at a time.
  auto build = [&](const std::string& skip, std::map<std::string, std::string> meta_override = {}) {
    SafetensorsWriter w;
    if (skip != "qweight_wide") w.add("w.qweight", DType::U8, {R, Q}, t.qweight);
    if (skip == "qweight_wide") w.add("w.qweight", DType::U8, {R, Q + 1}, rng.bytes(size_t(R * (Q + 1))));
    if (skip != "scales" && skip != "scales_f32") w.add("w.scales", DType::F16, {R, B}, t.scales);
    if (skip == "scales_f32") w.add("w.scales", DType::F32, {R, B / 2 + 1}, rng.bytes(size_t(R * (B / 2 + 1) * 4)));
    w.add("w.qzeros", DType::U8, {R, (B + 1) / 2}, t.aux);
    const float gs = rng.normal();
    if (skip != "global_scale") w.add_f32("w.global_scale", {1}, &gs);
    if (skip == "global_scale") w.add("w.global_scale", DType::F32, {2}, rng.bytes(8));
    w.add_f32("w.sv_pair", {2}, std::vector<float>{5, 8}.data());
    std::map<std::string, std::string> meta = {{"w.format", "toy4"}, {"w.block", "8"},
                                               {"w.rows", std::to_string(R)},
                                               {"w.cols", std::to_string(t.cols)}};
    for (const auto& [k, v] : meta_override) meta[k] = v;
    for (const auto& [k, v] : meta)
      if (!v.empty()) w.set_metadata(k, v);
    w.write(p);
    return SafetensorsFile::open(p);
  };
  auto read = [&](std::shared_ptr<SafetensorsFile> f) { read_packed(*f, "w", kToy); };
  EXPECT_NO_THROW(read(build("")));  // the baseline is fine
  expect_error([&] { read(build("scales")); }, {p.string(), "w.scales", "missing"});
  expect_error([&] { read(build("qweight_wide")); }, {p.string(), "qweight", "needs"});
  expect_error([&] { read(build("scales_f32")); }, {p.string(), "w.scales", "F16"});
  expect_error([&] { read(build("global_scale")); }, {p.string(), "w.global_scale", "F32 [1]"});
  expect_error([&] { read(build("", {{"w.format", "nvfp4"}})); }, {p.string(), "nvfp4", "toy4"});
  expect_error([&] { read(build("", {{"w.format", ""}})); }, {p.string(), "w.format"});
  expect_error([&] { read(build("", {{"w.rows", "3x"}})); }, {p.string(), "w.rows", "3x"});
  expect_error([&] { read(build("", {{"w.rows", std::to_string(R + 1)}})); }, {p.string(), "w.qweight"});
  expect_error([&] { read(build("", {{"w.cols", std::to_string(t.cols + 2)}})); }, {p.string(), "\"w\""});
  expect_error([&] { read(build("", {{"w.block", "-8"}})); }, {p.string(), "w.block"});
}

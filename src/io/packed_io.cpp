// PackedTensor <-> safetensors, in the naming of packed_io.h.
#include "nibble/packed_io.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "nibble/error.h"

namespace nibble {

namespace {

// Bytes per row of each plane that `info` produces for `cols` columns at `block`, learned from
// the format itself by quantizing one zero row. Formats without a quantizer are not probed.
struct RowLayout {
  int64_t qweight = 0, scales = 0, aux = 0;
  int block = 0;
};

std::optional<RowLayout> probe_layout(const FormatInfo& info, int64_t cols, int block,
                                      const std::string& name) {
  if (!info.quantize) return std::nullopt;
  const std::vector<float> zeros(size_t(cols), 0.0f);
  QuantOptions opt;
  opt.block = block;
  opt.name = name;
  PackedTensor p;
  try {
    p = info.quantize(zeros.data(), 1, cols, opt);
  } catch (const Error& e) {
    throw Error(fmt::format("packed tensor \"{}\": format {} rejects {} columns at block {}: {}",
                            name, info.name, cols, block, e.what()));
  }
  return RowLayout{int64_t(p.qweight.size()), int64_t(p.scales.size()), int64_t(p.aux.size()), p.block};
}

void check_against_format(const PackedTensor& t, const FormatInfo& info, const std::string& name,
                          const std::string& where) {
  auto fail = [&](const std::string& what) {
    throw Error(fmt::format("{}: packed tensor \"{}\" ({} [{}, {}], block {}): {}", where, name,
                            info.name, t.rows, t.cols, t.block, what));
  };
  if (t.format != info.name) fail(fmt::format("holds format \"{}\"", t.format));
  if (t.rows <= 0 || t.cols <= 0) fail("rows and cols must be positive");
  if (info.scale_dtype.empty() && !t.scales.empty()) fail("the format has no scales plane");
  if (info.aux_name.empty() && !t.aux.empty()) fail("the format has no aux plane");
  if (!std::isfinite(t.global_scale) || !std::isfinite(t.sv_a) || !std::isfinite(t.sv_b))
    fail("global_scale / sv pair must be finite");
  const auto layout = probe_layout(info, t.cols, t.block, name);
  if (!layout) return;
  if (layout->block != t.block) fail(fmt::format("the format uses block {}", layout->block));
  auto plane = [&](const char* what, size_t have, int64_t per_row) {
    if (int64_t(have) != t.rows * per_row)
      fail(fmt::format("{} has {} bytes, the format needs {} ({} per row)", what, have,
                       t.rows * per_row, per_row));
  };
  plane("qweight", t.qweight.size(), layout->qweight);
  plane("scales", t.scales.size(), layout->scales);
  plane(info.aux_name.empty() ? "aux" : std::string(info.aux_name).c_str(), t.aux.size(), layout->aux);
}

std::vector<uint8_t> f32_bytes(std::initializer_list<float> v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.begin(), out.size());
  return out;
}

// Splits a plane into [rows, bytes_per_row / elem] of the given dtype.
std::vector<int64_t> plane_shape(const PackedTensor& t, size_t bytes, DType dtype,
                                 const std::string& tensor) {
  const size_t row_bytes = bytes / size_t(t.rows);
  if (row_bytes * size_t(t.rows) != bytes || row_bytes % dtype_size(dtype) != 0)
    throw Error(fmt::format("packed tensor \"{}\": {} bytes do not split into {} rows of {}",
                            tensor, bytes, t.rows, dtype_name(dtype)));
  return {t.rows, int64_t(row_bytes / dtype_size(dtype))};
}

// Where a packed tensor is read from: a single file or a model directory.
struct Source {
  std::function<const TensorView*(const std::string&)> find;
  std::function<const std::map<std::string, std::string>&(const std::string&)> metadata_of;
  std::string where;
};

Source source_of(const TensorStore& s) {
  return {[&s](const std::string& n) { return s.find(n); },
          [&s](const std::string& n) -> const std::map<std::string, std::string>& { return s.metadata_of(n); },
          s.dir().string()};
}

Source source_of(const SafetensorsFile& f) {
  return {[&f](const std::string& n) { return f.find(n); },
          [&f](const std::string&) -> const std::map<std::string, std::string>& { return f.metadata(); },
          f.path().string()};
}

const TensorView& need(const Source& src, const std::string& tensor) {
  if (const TensorView* v = src.find(tensor)) return *v;
  throw Error(fmt::format("{}: packed tensor is missing \"{}\"", src.where, tensor));
}

std::string meta(const Source& src, const std::string& name, const std::string& key) {
  const auto& m = src.metadata_of(name + ".qweight");
  auto it = m.find(name + "." + key);
  if (it == m.end())
    throw Error(fmt::format("{}: packed tensor \"{}\" lacks metadata \"{}.{}\"", src.where, name,
                            name, key));
  return it->second;
}

int64_t meta_int(const Source& src, const std::string& name, const std::string& key) {
  const std::string s = meta(src, name, key);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0)
    throw Error(fmt::format("{}: metadata \"{}.{}\" must be a non-negative integer, got \"{}\"",
                            src.where, name, key, s));
  return v;
}

// A plane tensor: checks dtype and that it is [rows, n]; returns its bytes.
std::vector<uint8_t> read_plane(const TensorView& v, DType dtype, int64_t rows, const std::string& where) {
  if (v.dtype != dtype || v.shape.size() != 2 || v.shape[0] != rows)
    throw Error(fmt::format("{}: \"{}\" must be {} [{}, n], got {} with {} dimensions", where,
                            v.name, dtype_name(dtype), rows, dtype_name(v.dtype), v.shape.size()));
  return {v.data, v.data + v.nbytes};
}

std::vector<float> read_f32(const TensorView& v, size_t n, const std::string& where) {
  if (v.dtype != DType::F32 || v.shape != std::vector<int64_t>{int64_t(n)})
    throw Error(fmt::format("{}: \"{}\" must be F32 [{}]", where, v.name, n));
  return v.to_float();
}

PackedTensor read_from(const Source& src, const std::string& name, const FormatInfo& info) {
  PackedTensor t;
  t.format = meta(src, name, "format");
  if (t.format != info.name)
    throw Error(fmt::format("{}: packed tensor \"{}\" is stored as \"{}\", not \"{}\"", src.where,
                            name, t.format, info.name));
  t.rows = meta_int(src, name, "rows");
  t.cols = meta_int(src, name, "cols");
  const int64_t block = meta_int(src, name, "block");
  if (block > INT32_MAX)
    throw Error(fmt::format("{}: metadata \"{}.block\" is too large", src.where, name));
  t.block = int(block);
  t.qweight = read_plane(need(src, name + ".qweight"), DType::U8, t.rows, src.where);
  if (!info.scale_dtype.empty())
    t.scales = read_plane(need(src, name + ".scales"), dtype_from_name(std::string(info.scale_dtype)),
                          t.rows, src.where);
  if (!info.aux_name.empty())
    if (const TensorView* aux = src.find(name + "." + std::string(info.aux_name)))
      t.aux = read_plane(*aux, DType::U8, t.rows, src.where);
  t.global_scale = read_f32(need(src, name + ".global_scale"), 1, src.where)[0];
  const auto sv = read_f32(need(src, name + ".sv_pair"), 2, src.where);
  t.sv_a = sv[0];
  t.sv_b = sv[1];
  check_against_format(t, info, name, src.where);
  return t;
}

}  // namespace

void write_packed(SafetensorsWriter& w, const std::string& name, const PackedTensor& t,
                  const FormatInfo& info) {
  check_against_format(t, info, name, "safetensors writer");
  w.add(name + ".qweight", DType::U8, plane_shape(t, t.qweight.size(), DType::U8, name), t.qweight);
  if (!info.scale_dtype.empty()) {
    const DType sd = dtype_from_name(std::string(info.scale_dtype));
    w.add(name + ".scales", sd, plane_shape(t, t.scales.size(), sd, name), t.scales);
  }
  if (!t.aux.empty()) {
    const std::string aux = name + "." + std::string(info.aux_name);
    w.add(aux, DType::U8, plane_shape(t, t.aux.size(), DType::U8, name), t.aux);
  }
  w.add(name + ".global_scale", DType::F32, {1}, f32_bytes({t.global_scale}));
  w.add(name + ".sv_pair", DType::F32, {2}, f32_bytes({t.sv_a, t.sv_b}));
  w.set_metadata(name + ".format", t.format);
  w.set_metadata(name + ".block", std::to_string(t.block));
  w.set_metadata(name + ".rows", std::to_string(t.rows));
  w.set_metadata(name + ".cols", std::to_string(t.cols));
}

void write_packed(SafetensorsWriter& w, const std::string& name, const PackedTensor& t) {
  write_packed(w, name, t, find_format(t.format));
}

bool has_packed(const TensorStore& s, const std::string& name) { return s.find(name + ".qweight"); }
bool has_packed(const SafetensorsFile& f, const std::string& name) {
  return f.find(name + ".qweight");
}

std::string packed_format(const TensorStore& s, const std::string& name) {
  need(source_of(s), name + ".qweight");
  return meta(source_of(s), name, "format");
}
std::string packed_format(const SafetensorsFile& f, const std::string& name) {
  return meta(source_of(f), name, "format");
}

PackedTensor read_packed(const TensorStore& s, const std::string& name, const FormatInfo& info) {
  need(source_of(s), name + ".qweight");
  return read_from(source_of(s), name, info);
}
PackedTensor read_packed(const SafetensorsFile& f, const std::string& name, const FormatInfo& info) {
  return read_from(source_of(f), name, info);
}
PackedTensor read_packed(const TensorStore& s, const std::string& name) {
  return read_packed(s, name, find_format(packed_format(s, name)));
}
PackedTensor read_packed(const SafetensorsFile& f, const std::string& name) {
  return read_packed(f, name, find_format(packed_format(f, name)));
}

}  // namespace nibble

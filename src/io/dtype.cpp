// safetensors dtypes and the TensorView helpers (element count, conversion to float).
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "nibble/error.h"
#include "nibble/half.h"
#include "nibble/safetensors.h"

namespace nibble {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

namespace {

struct DTypeRow {
  DType type;
  const char* name;
  size_t size;
};

constexpr DTypeRow kDTypes[] = {
    {DType::F64, "F64", 8},         {DType::F32, "F32", 4},         {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},       {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::I64, "I64", 8},         {DType::I32, "I32", 4},         {DType::I16, "I16", 2},
    {DType::I8, "I8", 1},           {DType::U8, "U8", 1},           {DType::BOOL, "BOOL", 1},
    {DType::U16, "U16", 2},         {DType::U32, "U32", 4},         {DType::U64, "U64", 8},
};

const DTypeRow& row_of(DType t) {
  for (const auto& r : kDTypes)
    if (r.type == t) return r;
  throw Error(fmt::format("invalid DType value {}", int(t)));
}

}  // namespace

const char* dtype_name(DType t) { return row_of(t).name; }

size_t dtype_size(DType t) { return row_of(t).size; }

DType dtype_from_name(const std::string& s) {
  for (const auto& r : kDTypes)
    if (s == r.name) return r.type;
  std::string known;
  for (const auto& r : kDTypes) known += fmt::format("{}{}", known.empty() ? "" : ", ", r.name);
  throw Error(fmt::format("unknown dtype \"{}\" (known: {})", s, known));
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void TensorView::to_float(float* out) const {
  const size_t n = nbytes / dtype_size(dtype);
  switch (dtype) {
    case DType::F32:
      if (n) std::memcpy(out, data, n * 4);
      return;
    case DType::F64:
      for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, data + 8 * i, 8);
        out[i] = float(v);
      }
      return;
    case DType::F16:
    case DType::BF16:
      // Parallel: loading a model reads every weight through here (8B elements for an 8B model).
#pragma omp parallel for schedule(static) if (n >= (size_t(1) << 20))
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, data + 2 * i, 2);
        out[i] = dtype == DType::F16 ? half_to_float(v) : bf16_to_float(v);
      }
      return;
    default:
      throw Error(fmt::format("{}: tensor \"{}\" has dtype {}, which cannot be read as float "
                              "(F32/F16/BF16/F64 only)",
                              file, name, dtype_name(dtype)));
  }
}

std::vector<float> TensorView::to_float() const {
  std::vector<float> out(nbytes / dtype_size(dtype));
  to_float(out.data());
  return out;
}

}  // namespace nibble

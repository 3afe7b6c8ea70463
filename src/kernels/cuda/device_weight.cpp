// DeviceWeight: validation of a PackedTensor against what its kernel reads, offline repacking
// into the kernel layout, upload.
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "nibble/cuda/check.h"
#include "nibble/cuda/linear.h"
#include "nibble/error.h"
#include "repack.h"
#include "rope_pairs.h"

namespace nibble::cuda {
namespace {

struct KernelSpec {
  std::string_view format;
  WeightKind kind;
  int block;  // the only group size the kernel supports
};
constexpr KernelSpec kSpecs[] = {
    {"nvfp4", WeightKind::nvfp4, 16},
    {"nvfp4-4over6", WeightKind::nvfp4, 16},  // nvfp4 storage, another quantizer
    {"nvfp4-razer", WeightKind::nvfp4_razer, 16},
    {"mxfp4", WeightKind::mxfp4, 32},
    {"fp4-g128", WeightKind::fp4_g128, 128},
    {"razer-fp4-g128", WeightKind::razer_fp4_g128, 128},
    {"razer-fp3-g128", WeightKind::razer_fp3_g128, 128},
    {"int4-g128", WeightKind::int4_g128, 128},
    {"nf4", WeightKind::nf4, 64},
    {"fp16", WeightKind::fp16, 0},  // plain FP16 [N][K], no blocks
};

const KernelSpec* find_spec(std::string_view format) {
  for (const auto& s : kSpecs)
    if (s.format == format) return &s;
  return nullptr;
}

// Serialized plane sizes the kernel expects (bytes per row): codes, scales, aux.
struct Planes {
  int64_t q, s, aux;
};
Planes serialized_planes(WeightKind k, int64_t K) {
  switch (k) {
    case WeightKind::nvfp4:
    case WeightKind::nvfp4_razer: return {K / 2, K / 16, 0};
    case WeightKind::mxfp4: return {K / 2, K / 32, 0};
    case WeightKind::fp4_g128:
    case WeightKind::razer_fp4_g128: return {K / 2, K / 128 * 2, 0};
    case WeightKind::razer_fp3_g128: return {K / 32 * 12, K / 128 * 2, 0};
    case WeightKind::int4_g128: return {K / 2, K / 128 * 2, (K / 128 + 1) / 2};
    case WeightKind::nf4: return {K / 2, K / 64 * 4, 0};
    case WeightKind::fp16: return {K * 2, 0, 0};
  }
  return {0, 0, 0};
}

void check_plane(std::string_view name, const char* field, size_t have, int64_t rows, int64_t per_row) {
  if (int64_t(have) != rows * per_row)
    throw Error(fmt::format("weight '{}': field {} holds {} bytes, the kernel expects {} ({} rows x {})", name,
                            field, have, rows * per_row, rows, per_row));
}

void* to_device(const std::vector<uint8_t>& host) {
  if (host.empty()) return nullptr;
  void* p = nullptr;
  NIBBLE_CUDA_CHECK(cudaMalloc(&p, host.size()));
  NIBBLE_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice));
  return p;
}

}  // namespace

DeviceWeight::DeviceWeight(DeviceWeight&& o) noexcept { *this = std::move(o); }

DeviceWeight& DeviceWeight::operator=(DeviceWeight&& o) noexcept {
  if (this != &o) {
    release();
    kind = o.kind, format = std::move(o.format), N = o.N, K = o.K, block = o.block;
    global_scale = o.global_scale, sv_a = o.sv_a, sv_b = o.sv_b, mma_out_factor = o.mma_out_factor;
    qweight = std::exchange(o.qweight, nullptr), scales = std::exchange(o.scales, nullptr);
    aux = std::exchange(o.aux, nullptr), qweight_mma = std::exchange(o.qweight_mma, nullptr);
    scales_mma = std::exchange(o.scales_mma, nullptr), mma_bytes = std::exchange(o.mma_bytes, 0);
    qweight_bytes = std::exchange(o.qweight_bytes, 0), scales_bytes = std::exchange(o.scales_bytes, 0);
    aux_bytes = std::exchange(o.aux_bytes, 0);
    part_rows = std::move(o.part_rows), part_scales = std::move(o.part_scales), silu_pairs = o.silu_pairs;
    rope_head_dim = o.rope_head_dim;
  }
  return *this;
}

DeviceWeight::~DeviceWeight() { release(); }

void DeviceWeight::release() noexcept {
  for (void* p : {qweight, scales, aux, qweight_mma, scales_mma})
    if (p) cudaFree(p);
  qweight = scales = aux = qweight_mma = scales_mma = nullptr;
}

bool has_kernel(std::string_view format) { return find_spec(format) != nullptr; }

std::vector<std::string> kernel_formats() {
  std::vector<std::string> out;
  for (const auto& s : kSpecs) out.emplace_back(s.format);
  return out;
}

DeviceWeight upload(const PackedTensor& t, std::string_view name) {
  const KernelSpec* spec = find_spec(t.format);
  if (!spec) {
    std::string known;
    for (const auto& s : kSpecs) known += (known.empty() ? "" : ", ") + std::string(s.format);
    throw Error(fmt::format("weight '{}': format '{}' has no CUDA kernel (kernels: {})", name, t.format, known));
  }
  if (t.block != spec->block)
    throw Error(fmt::format("weight '{}': field block is {}, the {} kernel needs {}", name, t.block, t.format,
                            spec->block));
  if (t.rows <= 0 || t.cols <= 0 || t.rows > (int64_t(1) << 30) || t.cols > (int64_t(1) << 30))
    throw Error(fmt::format("weight '{}': shape [{}, {}] is empty or too large", name, t.rows, t.cols));
  const int64_t kmult = spec->kind == WeightKind::fp16 ? 8 : std::max(32, spec->block);  // a lane chunk
  if (t.cols % kmult)
    throw Error(fmt::format("weight '{}': cols (K) = {} must be a multiple of {} for the {} kernel", name, t.cols,
                            kmult, t.format));
  const Planes pl = serialized_planes(spec->kind, t.cols);
  check_plane(name, "qweight", t.qweight.size(), t.rows, pl.q);
  check_plane(name, "scales", t.scales.size(), t.rows, pl.s);
  check_plane(name, "aux", t.aux.size(), t.rows, pl.aux);

  DeviceWeight w;
  w.kind = spec->kind, w.format = t.format, w.N = t.rows, w.K = t.cols, w.block = t.block;
  w.global_scale = t.global_scale, w.sv_a = t.sv_a, w.sv_b = t.sv_b;
  std::vector<uint8_t> q, s;
  const std::vector<uint8_t>* qp = &t.qweight;
  const std::vector<uint8_t>* sp = &t.scales;
  switch (spec->kind) {
    case WeightKind::razer_fp3_g128:
      q = detail::repack_fp3_planes(t.qweight);
      qp = &q;
      break;
    case WeightKind::int4_g128:
      s = detail::repack_int4_meta(t.scales, t.aux, t.rows, t.cols / 128);
      sp = &s;
      break;
    default: break;
  }
  w.qweight = to_device(*qp), w.qweight_bytes = qp->size();
  if (spec->kind != WeightKind::razer_fp3_g128 && spec->kind != WeightKind::fp16 && t.cols % 64 == 0) {
    std::optional<std::vector<uint8_t>> tiles;
    if (spec->kind == WeightKind::nvfp4 || spec->kind == WeightKind::nvfp4_razer) {
      tiles = detail::repack_mma_tiles(*qp, t.rows, t.cols, sp, 4);
    } else if (spec->kind == WeightKind::mxfp4) {
      int hi = 0;
      if (const auto f = detail::mxfp4_tile_exponents(*qp, *sp, t.rows, t.cols, name, &hi)) {
        tiles = detail::repack_mma_tiles(*qp, t.rows, t.cols, &*f, 2);
        w.mma_out_factor = detail::mxfp4_tile_factor(hi);
      }
    } else {
      tiles = detail::repack_mma_tiles(*qp, t.rows, t.cols);
      if (spec->kind == WeightKind::nf4) detail::repack_nf4_pairs(*tiles);
      const std::vector<uint8_t> meta = detail::repack_block_major(*sp, t.rows, t.cols / spec->block);
      w.scales_mma = to_device(meta), w.mma_bytes = meta.size();
    }
    if (tiles) w.qweight_mma = to_device(*tiles), w.mma_bytes += tiles->size();
  }
  w.scales = to_device(*sp), w.scales_bytes = sp->size();
  return w;
}

namespace {

// The parts' planes row after row (interleave = false) or row i of every part, then row i + 1
// (interleave = true, equal row counts). Checks what stacking needs; upload() checks the rest.
PackedTensor stack_rows(const std::vector<const PackedTensor*>& parts, bool interleave, std::string_view name) {
  const PackedTensor& first = *parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    const PackedTensor& p = *parts[i];
    if (p.format != first.format || p.cols != first.cols || p.block != first.block)
      throw Error(fmt::format("weights '{}': part {} is {} [{}, {}] block {}, part 0 is {} [{}, {}] block {}", name,
                              i, p.format, p.rows, p.cols, p.block, first.format, first.rows, first.cols, first.block));
    if (p.sv_a != first.sv_a || p.sv_b != first.sv_b)
      throw Error(fmt::format("weights '{}': part {} has other RaZeR special values than part 0", name, i));
    if (interleave && p.rows != first.rows)
      throw Error(fmt::format("weights '{}': part {} has {} rows, part 0 {}: rows interleave only for equal counts",
                              name, i, p.rows, first.rows));
  }
  PackedTensor all = first;
  all.global_scale = 1.0f;
  all.rows = 0;
  for (const PackedTensor* p : parts) all.rows += p->rows;
  using Plane = std::vector<uint8_t> PackedTensor::*;
  for (Plane plane : {&PackedTensor::qweight, &PackedTensor::scales, &PackedTensor::aux}) {
    std::vector<uint8_t>& out = all.*plane;
    out.clear();
    for (const PackedTensor* p : parts)
      if ((p->*plane).size() % size_t(p->rows))
        throw Error(fmt::format("weights '{}': a plane of {} bytes does not split into {} rows", name,
                                (p->*plane).size(), p->rows));
    if (!interleave) {
      for (const PackedTensor* p : parts) out.insert(out.end(), (p->*plane).begin(), (p->*plane).end());
      continue;
    }
    const size_t row_bytes = (first.*plane).size() / size_t(first.rows);
    for (int64_t r = 0; r < first.rows; ++r)
      for (const PackedTensor* p : parts) {
        const auto row = (p->*plane).begin() + ptrdiff_t(size_t(r) * row_bytes);
        out.insert(out.end(), row, row + ptrdiff_t(row_bytes));
      }
  }
  return all;
}

// t's rows in RoPE pair order for heads of d rows (rope_pairs.h).
PackedTensor rope_pair_order(const PackedTensor& t, int d, std::string_view name) {
  if (d <= 0 || d % 2 != 0 || t.rows % d != 0)
    throw Error(fmt::format("weights '{}': {} rows are not whole heads of an even {} rows", name, t.rows, d));
  PackedTensor out = t;
  using Plane = std::vector<uint8_t> PackedTensor::*;
  for (Plane plane : {&PackedTensor::qweight, &PackedTensor::scales, &PackedTensor::aux}) {
    const std::vector<uint8_t>& in = t.*plane;
    if (in.empty()) continue;
    const size_t row_bytes = in.size() / size_t(t.rows);
    for (int64_t r = 0; r < t.rows; ++r) {
      const int64_t src = r - r % d + detail::rope_pair_source(int(r % d), d);
      std::copy_n(in.begin() + ptrdiff_t(size_t(src) * row_bytes), row_bytes,
                  (out.*plane).begin() + ptrdiff_t(size_t(r) * row_bytes));
    }
  }
  return out;
}

}  // namespace

DeviceWeight upload_stacked(const std::vector<const PackedTensor*>& parts, std::string_view name, int rope_head_dim) {
  if (parts.size() < 2 || parts.size() > 3)
    throw Error(fmt::format("weights '{}': a stack takes 2 or 3 weights, got {}", name, parts.size()));
  std::vector<PackedTensor> paired;  // q and k in RoPE pair order
  std::vector<const PackedTensor*> rows = parts;
  if (rope_head_dim != 0) {
    if (parts.size() != 3)
      throw Error(fmt::format("weights '{}': RoPE pair order takes q, k and v, got {} weights", name, parts.size()));
    if (parts[2]->rows % rope_head_dim != 0)
      throw Error(fmt::format("weights '{}': v's {} rows are not whole heads of {}", name, parts[2]->rows, rope_head_dim));
    for (int i = 0; i < 2; ++i) paired.push_back(rope_pair_order(*parts[size_t(i)], rope_head_dim, name));
    rows[0] = &paired[0], rows[1] = &paired[1];
  }
  DeviceWeight w = upload(stack_rows(rows, false, name), name);
  w.rope_head_dim = rope_head_dim;
  for (const PackedTensor* p : parts) {
    w.part_rows.push_back(p->rows);
    w.part_scales.push_back(p->global_scale);
  }
  return w;
}

DeviceWeight upload_silu_pair(const PackedTensor& gate, const PackedTensor& up, std::string_view name) {
  DeviceWeight w = upload(stack_rows({&gate, &up}, true, name), name);
  w.part_rows = {gate.rows, up.rows};
  w.part_scales = {gate.global_scale, up.global_scale};
  w.silu_pairs = true;
  return w;
}

}  // namespace nibble::cuda

// DeviceWeight: validation of a PackedTensor against what its kernel reads, offline repacking
// into the kernel layout, upload.
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <utility>

#include "nibble/cuda/check.h"
#include "nibble/cuda/linear.h"
#include "nibble/error.h"
#include "repack.h"

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
    global_scale = o.global_scale, sv_a = o.sv_a, sv_b = o.sv_b;
    qweight = std::exchange(o.qweight, nullptr), scales = std::exchange(o.scales, nullptr);
    aux = std::exchange(o.aux, nullptr), qweight_mma = std::exchange(o.qweight_mma, nullptr);
    qweight_mma_bytes = std::exchange(o.qweight_mma_bytes, 0);
    qweight_bytes = std::exchange(o.qweight_bytes, 0), scales_bytes = std::exchange(o.scales_bytes, 0);
    aux_bytes = std::exchange(o.aux_bytes, 0);
  }
  return *this;
}

DeviceWeight::~DeviceWeight() { release(); }

void DeviceWeight::release() noexcept {
  for (void* p : {qweight, scales, aux, qweight_mma})
    if (p) cudaFree(p);
  qweight = scales = aux = qweight_mma = nullptr;
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
  const int64_t kmult = std::max(32, spec->block);
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
    case WeightKind::fp4_g128:
    case WeightKind::razer_fp4_g128:
      q = detail::repack_fp4_ems(t.qweight, spec->kind == WeightKind::razer_fp4_g128);
      qp = &q;
      break;
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
  if (spec->kind != WeightKind::razer_fp3_g128 && t.cols % 64 == 0) {
    const std::vector<uint8_t> tiles = detail::repack_mma_tiles(*qp, t.rows, t.cols);
    w.qweight_mma = to_device(tiles), w.qweight_mma_bytes = tiles.size();
  }
  w.scales = to_device(*sp), w.scales_bytes = sp->size();
  return w;
}

}  // namespace nibble::cuda

#pragma once
// float64 causal attention of one query head over one KV head, and the KV caches of the GPU
// attention tests (FP16, or E4M3 rows quantized by the CPU format library) with their values as
// the kernels must read them.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda/gpu_buffer.h"
#include "nibble/cuda/ops.h"
#include "nibble/format.h"
#include "nibble/half.h"

namespace nibble::cuda::test {

// q: d fp16 values; at(j, i): element i of the head's cache row j (double); attends to 0..last.
template <class KAt, class VAt>
std::vector<double> ref_attention(const uint16_t* q, KAt&& k_at, VAt&& v_at, int last, int d) {
  std::vector<double> s(size_t(last) + 1), out(size_t(d), 0.0);
  double mx = -INFINITY;
  for (int j = 0; j <= last; ++j) {
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += double(half_to_float(q[i])) * k_at(j, i);
    s[size_t(j)] = dot / std::sqrt(double(d));
    mx = std::max(mx, s[size_t(j)]);
  }
  double sum = 0;
  for (double& x : s) sum += (x = std::exp(x - mx));
  for (int j = 0; j <= last; ++j)
    for (int i = 0; i < d; ++i) out[size_t(i)] += s[size_t(j)] / sum * v_at(j, i);
  return out;
}

// One of K or V: rows [n_slots][nkv][max_ctx] of d values on the host, in the cache's element
// type, with the value of each element as stored (FP16 as is; E4M3 code x row scale, as the CPU's
// fp8-e4m3 format dequantizes). Rows never written hold NaN (fp16 NaN; E4M3 code 0x7F, scale NaN).
struct HostKv {
  ops::KvType type;
  int d;
  std::vector<uint16_t> h16;  // fp16
  std::vector<uint8_t> codes;  // e4m3
  std::vector<float> scales, values;

  HostKv(ops::KvType t, size_t rows, int d_) : type(t), d(d_) {
    if (t == ops::KvType::fp16) {
      h16.assign(rows * d, 0x7E00);
    } else {
      codes.assign(rows * d, 0x7F);
      scales.assign(rows, std::numeric_limits<float>::quiet_NaN());
      values.assign(rows * d, std::numeric_limits<float>::quiet_NaN());
    }
  }
  // Row r from d floats (rounded to fp16, or quantized to E4M3 by the format library).
  void set_row(size_t r, const float* x) {
    if (type == ops::KvType::fp16) {
      for (int i = 0; i < d; ++i) h16[r * d + i] = float_to_half(x[i]);
      return;
    }
    const FormatInfo& f = find_format("fp8-e4m3");
    const PackedTensor p = f.quantize(x, 1, d, {});
    std::memcpy(&codes[r * d], p.qweight.data(), size_t(d));
    std::memcpy(&scales[r], p.scales.data(), 4);
    f.dequantize_rows(p, 0, 1, &values[r * d]);
  }
  double at(size_t r, int i) const {
    return type == ops::KvType::fp16 ? double(half_to_float(h16[r * d + i])) : double(values[r * d + i]);
  }
  double max_abs() const {
    double m = 0;
    for (size_t r = 0; r * d < (type == ops::KvType::fp16 ? h16.size() : codes.size()); ++r)
      for (int i = 0; i < d; ++i)
        if (!std::isnan(at(r, i))) m = std::max(m, std::fabs(at(r, i)));
    return m;
  }
};

// The two HostKv on the device, as an ops::KvCache.
struct DeviceKv {
  GpuBuffer<uint8_t> k, v;
  GpuBuffer<float> ks, vs;
  ops::KvCache cache;
  static std::vector<uint8_t> bytes(const HostKv& h) {
    if (h.type == ops::KvType::e4m3) return h.codes;
    std::vector<uint8_t> b(h.h16.size() * 2);
    std::memcpy(b.data(), h.h16.data(), b.size());
    return b;
  }
  static std::vector<float> scales(const HostKv& h) { return h.scales.empty() ? std::vector<float>(1) : h.scales; }
  DeviceKv(const HostKv& hk, const HostKv& hv, int max_ctx)
      : k(bytes(hk)), v(bytes(hv)), ks(scales(hk)), vs(scales(hv)),
        cache{hk.type, k.get(), v.get(), hk.type == ops::KvType::e4m3 ? ks.get() : nullptr,
              hk.type == ops::KvType::e4m3 ? vs.get() : nullptr, max_ctx} {}
  // The device cache back on the host (after a kernel stored rows into it).
  HostKv host(const HostKv& like, bool values_of_v) const {
    HostKv h = like;
    const auto b = (values_of_v ? v : k).host();
    if (h.type == ops::KvType::fp16) {
      std::memcpy(h.h16.data(), b.data(), b.size());
      return h;
    }
    h.codes = b;
    h.scales = (values_of_v ? vs : ks).host();
    const FormatInfo& f = find_format("fp8-e4m3");
    for (size_t r = 0; r < h.scales.size(); ++r) {
      PackedTensor p;
      p.format = "fp8-e4m3", p.rows = 1, p.cols = h.d;
      p.qweight.assign(h.codes.begin() + long(r * h.d), h.codes.begin() + long((r + 1) * h.d));
      p.scales.resize(4);
      std::memcpy(p.scales.data(), &h.scales[r], 4);
      f.dequantize_rows(p, 0, 1, &h.values[r * h.d]);
    }
    return h;
  }
};

}  // namespace nibble::cuda::test

// The float64 reference formats (see reference_formats.h). Error sums use the same order as the
// definition (element 0 first), and FMA contraction is off so each product is rounded on its own.
#pragma GCC optimize("fp-contract=off")
#include "formats/reference_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "nibble/half.h"

namespace ref {
namespace {

using nibble::PackedTensor;

// ---- value tables ---------------------------------------------------------------------------

double minifloat(int e, int m, int mbits, int bias) {
  return e == 0 ? std::ldexp(m, 1 - bias - mbits) : std::ldexp((1 << mbits) + m, e - bias - mbits);
}

std::vector<double> table(int n, double (*value)(int)) {
  std::vector<double> t(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) t[size_t(c)] = value(c);
  return t;
}

// Index of the nearest entry of an increasing table to a >= 0; ties to the even index; values
// past the end saturate to the last entry.
int nearest_even(const std::vector<double>& t, double a) {
  int best = 0;
  for (int i = 1; i < int(t.size()); ++i) {
    double d = std::fabs(a - t[size_t(i)]), db = std::fabs(a - t[size_t(best)]);
    if (d < db || (d == db && i % 2 == 0)) best = i;
  }
  return best;
}

// Same, binary search (for the 31744-entry FP16 table).
int nearest_even_sorted(const std::vector<double>& t, double a) {
  auto it = std::lower_bound(t.begin(), t.end(), a);
  if (it == t.begin()) return 0;
  if (it == t.end()) return int(t.size()) - 1;
  int hi = int(it - t.begin()), lo = hi - 1;
  double dl = a - t[size_t(lo)], dh = t[size_t(hi)] - a;
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return lo % 2 == 0 ? lo : hi;
}

const std::vector<double>& e4m3_pos() { static auto t = table(127, e4m3_value); return t; }
const std::vector<double>& e3m3_all() { static auto t = table(64, e3m3_value); return t; }
const std::vector<double>& fp16_pos() { static auto t = table(0x7C00, fp16_value); return t; }
const std::vector<double>& fp4_pos() { static auto t = table(8, fp4_value); return t; }

int fp4_even(double r) { return nearest_even(fp4_pos(), std::fabs(r)) | (std::signbit(r) ? 8 : 0); }

// RaZeR element rule: nearest of `codes` (values by `value`), ties to the smaller magnitude,
// then to the lower code.
template <class ValueFn>
int nearest_small(double r, const std::vector<int>& codes, ValueFn value) {
  int best = -1;
  double bd = 0, bm = 0;
  for (int c : codes) {
    double v = value(c), d = std::fabs(r - v), m = std::fabs(v);
    if (best < 0 || d < bd || (d == bd && m < bm)) best = c, bd = d, bm = m;
  }
  return best;
}

// The fixed summation order of every error / least-squares sum: four running sums over i mod 4,
// combined as (s0 + s1) + (s2 + s3).
struct Sum4 {
  double s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  void add(double t) { s[i++ % 4] += t; }
  double total() const { return (s[0] + s[1]) + (s[2] + s[3]); }
};

// ---- layout ---------------------------------------------------------------------------------

struct Layout {
  int64_t rows, cols;
  int block;
  int64_t nblocks() const { return (cols + block - 1) / block; }
};

// Packs codes [rows][nblocks * block] two per byte, element 2j in the low nibble.
std::vector<uint8_t> pack4(const std::vector<int>& codes) {
  std::vector<uint8_t> out(codes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(codes[2 * i] + 16 * codes[2 * i + 1]);
  return out;
}
// Three bit planes per 32 codes: bytes 0-3 bit 0, 4-7 bit 1, 8-11 bit 2 (element i at bit i,
// little-endian).
std::vector<uint8_t> pack3(const std::vector<int>& codes) {
  std::vector<uint8_t> out(codes.size() / 32 * 12, 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    size_t chunk = i / 32, bit = i % 32;
    for (int k = 0; k < 3; ++k) {
      if ((codes[i] >> k) & 1) out[chunk * 12 + size_t(k) * 4 + bit / 8] |= uint8_t(1 << (bit % 8));
    }
  }
  return out;
}
int unpack4(const std::vector<uint8_t>& q, size_t i) { return (q[i / 2] >> (4 * (i % 2))) & 15; }
int unpack3(const std::vector<uint8_t>& q, size_t i) {
  size_t chunk = i / 32, bit = i % 32;
  int c = 0;
  for (int k = 0; k < 3; ++k) c |= ((q[chunk * 12 + size_t(k) * 4 + bit / 8] >> (bit % 8)) & 1) << k;
  return c;
}

void put_bytes(std::vector<uint8_t>& v, const void* p, size_t n) {
  auto b = static_cast<const uint8_t*>(p);
  v.insert(v.end(), b, b + n);
}
float get_f32(const std::vector<uint8_t>& v, size_t i) { float f; std::memcpy(&f, &v[4 * i], 4); return f; }
int get_u16(const std::vector<uint8_t>& v, size_t i) { return v[2 * i] | (v[2 * i + 1] << 8); }

double amax_of(const float* x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(x[i])));
  return m;
}

PackedTensor blank(std::string_view name, const Layout& l) {
  PackedTensor t;
  t.format = std::string(name);
  t.rows = l.rows;
  t.cols = l.cols;
  t.block = l.block;
  return t;
}

// Visits every block: f(row, block index, pointer to its first value, its length).
template <class F>
void each_block(const std::vector<float>& x, const Layout& l, F f) {
  for (int64_t r = 0; r < l.rows; ++r) {
    for (int64_t b = 0; b < l.nblocks(); ++b) {
      int64_t c0 = b * l.block;
      f(r, b, &x[size_t(r * l.cols + c0)], std::min<int64_t>(l.block, l.cols - c0));
    }
  }
}

// ---- formats ---------------------------------------------------------------------------------

PackedTensor plain(std::string_view name, const std::vector<float>& x, const Layout& l) {
  PackedTensor t = blank(name, l);
  t.block = 0;
  for (float v : x) {
    if (name == "fp32") {
      put_bytes(t.qweight, &v, 4);
    } else {
      uint16_t h = name == "fp16" ? nibble::float_to_half(v) : nibble::float_to_bf16(v);
      put_bytes(t.qweight, &h, 2);
    }
  }
  return t;
}

PackedTensor fp8_rows(const std::vector<float>& x, const Layout& l) {
  PackedTensor t = blank("fp8-e4m3", l);
  t.block = 0;
  for (int64_t r = 0; r < l.rows; ++r) {
    float scale = float(amax_of(&x[size_t(r * l.cols)], l.cols) / 448.0);
    put_bytes(t.scales, &scale, 4);
    for (int64_t c = 0; c < l.cols; ++c) {
      double v = x[size_t(r * l.cols + c)];
      int code = scale == 0 ? 0 : nearest_even_sorted(e4m3_pos(), std::fabs(v) / scale) | (std::signbit(v) ? 0x80 : 0);
      t.qweight.push_back(uint8_t(code));
    }
  }
  return t;
}

// NestedFP from its meaning: U = E4M3(|w| * 2^8) (nearest even, never NaN) with w's sign,
// L = the low 8 mantissa bits.
PackedTensor nested(std::string_view name, const std::vector<float>& x, const Layout& l) {
  PackedTensor t = blank(name, l);
  t.block = 0;
  for (float v : x) {
    uint16_t w = nibble::float_to_half(v);
    double a = std::fabs(fp16_value(w));
    if (a >= 1.875) throw std::runtime_error("reference: ineligible NestedFP value");
    t.qweight.push_back(uint8_t(nearest_even_sorted(e4m3_pos(), a * 256.0) | ((w >> 15) << 7)));
    t.aux.push_back(uint8_t(w & 0xFF));
  }
  return t;
}

PackedTensor int4(const std::vector<float>& x, const Layout& l) {
  PackedTensor t = blank("int4-g128", l);
  std::vector<int> codes(size_t(l.rows * l.nblocks() * l.block), 0);
  std::vector<int> zeros;
  each_block(x, l, [&](int64_t r, int64_t b, const float* v, int64_t n) {
    double lo = 0, hi = 0;
    for (int64_t i = 0; i < n; ++i) lo = std::min(lo, double(v[i])), hi = std::max(hi, double(v[i]));
    int sc = nearest_even_sorted(fp16_pos(), (hi - lo) / 15.0);
    put_bytes(t.scales, &sc, 2);
    double s = fp16_value(sc);
    int z = 0;
    if (s > 0) {
      z = int(std::clamp(std::nearbyint(-lo / s), 0.0, 15.0));
      for (int64_t i = 0; i < n; ++i) {
        codes[size_t((r * l.nblocks() + b) * l.block + i)] =
            int(std::clamp(std::nearbyint(v[i] / s) + z, 0.0, 15.0));
      }
    }
    zeros.push_back(z);
    if (b == l.nblocks() - 1 && l.nblocks() % 2) zeros.push_back(0);  // rows padded to whole bytes
  });
  t.qweight = pack4(codes);
  t.aux = pack4(zeros);
  return t;
}

PackedTensor nf4(const std::vector<float>& x, const Layout& l) {
  static const double levels[16] = {-1.0, -0.6961928009986877, -0.5250730514526367,
                                    -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
                                    -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                                    0.24611230194568634, 0.33791524171829224, 0.44070982933044434,
                                    0.5626170039176941, 0.7229568362236023, 1.0};
  PackedTensor t = blank("nf4", l);
  std::vector<int> codes(size_t(l.rows * l.nblocks() * l.block), 0);
  each_block(x, l, [&](int64_t r, int64_t b, const float* v, int64_t n) {
    float absmax = float(amax_of(v, n));
    put_bytes(t.scales, &absmax, 4);
    for (int64_t i = 0; i < n; ++i) {
      int best = 7;  // an all-zero block stores level 0.0
      if (absmax > 0) {
        double y = double(v[i]) / absmax;
        best = 0;
        for (int c = 1; c < 16; ++c) {
          if (std::fabs(y - levels[c]) < std::fabs(y - levels[best])) best = c;  // ties: lower code
        }
      }
      codes[size_t((r * l.nblocks() + b) * l.block + i)] = best;
    }
  });
  t.qweight = pack4(codes);
  return t;
}

PackedTensor mxfp4(const std::vector<float>& x, const Layout& l) {
  PackedTensor t = blank("mxfp4", l);
  std::vector<int> codes(size_t(l.rows * l.nblocks() * l.block), 0);
  each_block(x, l, [&](int64_t r, int64_t b, const float* v, int64_t n) {
    double bmax = amax_of(v, n);
    int e = 0;
    std::frexp(bmax, &e);  // bmax = f * 2^e, f in [0.5, 1): floor(log2 bmax) = e - 1
    int sc = bmax == 0 ? 0 : std::clamp(e - 1 - 2 + 127, 0, 254);
    t.scales.push_back(uint8_t(sc));
    for (int64_t i = 0; i < n; ++i) {
      codes[size_t((r * l.nblocks() + b) * l.block + i)] = fp4_even(v[i] / e8m0_value(sc));
    }
  });
  t.qweight = pack4(codes);
  return t;
}

// NVFP4 and 4over6: error of one block with scale code sc.
double nvfp4_block(const float* v, int64_t n, double gs, int sc, int* codes) {
  double step = gs * e4m3_value(sc);
  Sum4 err;
  for (int64_t i = 0; i < n; ++i) {
    codes[i] = step == 0 ? 0 : fp4_even(v[i] / step);
    double d = v[i] - fp4_value(codes[i]) * step;
    err.add(d * d);
  }
  return err.total();
}

PackedTensor nvfp4(std::string_view name, const std::vector<float>& x, const Layout& l) {
  PackedTensor t = blank(name, l);
  float gs = float(amax_of(x.data(), int64_t(x.size())) / 2688.0);
  if (gs == 0) gs = 1;
  t.global_scale = gs;
  std::vector<int> codes(size_t(l.rows * l.nblocks() * l.block), 0);
  each_block(x, l, [&](int64_t r, int64_t b, const float* v, int64_t n) {
    double bmax = amax_of(v, n);
    int* out = &codes[size_t((r * l.nblocks() + b) * l.block)];
    int sc6 = nearest_even(e4m3_pos(), bmax / (double(gs) * 6)), sc = sc6;
    double err6 = nvfp4_block(v, n, gs, sc6, out);
    if (name == "nvfp4-4over6") {
      int sc4 = nearest_even(e4m3_pos(), bmax / (double(gs) * 4)), tmp[16];
      if (nvfp4_block(v, n, gs, sc4, tmp) < err6) sc = sc4, std::copy(tmp, tmp + n, out);
    }
    t.scales.push_back(uint8_t(sc));
  });
  t.qweight = pack4(codes);
  return t;
}

// RaZeR on an FP4 grid: code 8 is sv. Error of one block at `step`.
double razer_block(const float* v, int64_t n, double step, double sv, int* codes) {
  static const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  auto value = [&](int c) { return c == 8 ? sv : fp4_value(c); };
  Sum4 err;
  for (int64_t i = 0; i < n; ++i) {
    codes[i] = step == 0 ? 0 : nearest_small(v[i] / step, all, value);
    double d = v[i] - value(codes[i]) * step;
    err.add(d * d);
  }
  return err.total();
}

PackedTensor nvfp4_razer(const std::vector<float>& x, const Layout& l, double a, double b) {
  PackedTensor t = blank("nvfp4-razer", l);
  float gs = float(amax_of(x.data(), int64_t(x.size())) / 180.0);
  if (gs == 0) gs = 1;
  t.global_scale = gs;
  t.sv_a = float(a), t.sv_b = float(b);
  std::vector<int> codes(size_t(l.rows * l.nblocks() * l.block), 0);
  each_block(x, l, [&](int64_t r, int64_t blk, const float* v, int64_t n) {
    double bmax = amax_of(v, n);
    const double svs[4] = {a, -a, b, -b};
    double best = 0;
    int byte = 0;
    for (int k = 0; k < 4; ++k) {
      int sc = nearest_even(e3m3_all(), bmax / (double(gs) * std::max(6.0, std::fabs(svs[k]))));
      int trial[16];
      double err = razer_block(v, n, gs * e3m3_value(sc), svs[k], trial);
      if (k == 0 || err < best) {
        best = err, byte = sc | (k >= 2 ? 0x40 : 0) | (k % 2 ? 0x80 : 0);
        std::copy(trial, trial + n, &codes[size_t((r * l.nblocks() + blk) * l.block)]);
      }
    }
    t.scales.push_back(uint8_t(byte));
  });
  t.qweight = pack4(codes);
  return t;
}

PackedTensor nvfp4_razer_act(const std::vector<float>& x, const Layout& l, double sv) {
  PackedTensor t = blank("nvfp4-razer-act", l);
  float gs = float(amax_of(x.data(), int64_t(x.size())) / 2688.0);
  if (gs == 0) gs = 1;
  t.global_scale = gs;
  t.sv_a = float(sv);
  std::vector<int> codes(size_t(l.rows * l.nblocks() * l.block), 0);
  each_block(x, l, [&](int64_t r, int64_t blk, const float* v, int64_t n) {
    int sc = nearest_even(e4m3_pos(), amax_of(v, n) / (double(gs) * 6));
    double step = gs * e4m3_value(sc);
    int plus[16], minus[16];
    double ep = razer_block(v, n, step, sv, plus), em = razer_block(v, n, step, -sv, minus);
    std::copy(em < ep ? minus : plus, (em < ep ? minus : plus) + n,
              &codes[size_t((r * l.nblocks() + blk) * l.block)]);
    t.scales.push_back(uint8_t(sc | (em < ep ? 0x80 : 0)));
  });
  t.qweight = pack4(codes);
  return t;
}

// Group formats (fp4-g128, razer-fp4-g128, razer-fp3-g128).
struct GroupGrid {
  int bits;           // 4 or 3
  bool special;       // -0 is the special value
  double level_max;   // 6 or 4
  double value(int c, double sv) const {
    if (special && c == (bits == 4 ? 8 : 4)) return sv;
    return bits == 4 ? fp4_value(c) : fp3_value(c);
  }
  std::vector<int> codes() const {  // the searchable codes: regular levels (+0 only) and sv
    std::vector<int> v;
    int neg_zero = bits == 4 ? 8 : 4;
    for (int c = 0; c < (1 << bits); ++c) {
      if (c != neg_zero || special) v.push_back(c);
    }
    return v;
  }
};

double group_fit(const GroupGrid& g, const float* v, int64_t n, double bmax, double gs, double sv,
                 int* codes, int* word) {
  auto value = [&](int c) { return g.value(c, sv); };
  std::vector<int> searchable = g.codes();
  double qmax = g.special ? std::max(g.level_max, std::fabs(sv)) : g.level_max;
  Sum4 num, den;
  for (int64_t i = 0; i < n; ++i) {
    double c = value(nearest_small(double(v[i]) * qmax / bmax, searchable, value));
    num.add(v[i] * c);
    den.add(c * c);
  }
  double refit = den.total() > 0 ? std::max(0.0, num.total() / den.total() / gs) : 0.0;
  int sc = nearest_even_sorted(fp16_pos(), refit);
  if (g.special) sc = std::min(sc, 0x3FFF);
  *word = sc;
  double step = gs * fp16_value(sc);
  Sum4 err;
  for (int64_t i = 0; i < n; ++i) {
    codes[i] = step == 0 ? 0 : nearest_small(v[i] / step, searchable, value);
    double d = v[i] - value(codes[i]) * step;
    err.add(d * d);
  }
  return err.total();
}

PackedTensor group_fp(std::string_view name, const std::vector<float>& x, const Layout& l,
                      double a, double b) {
  GroupGrid g{name == "razer-fp3-g128" ? 3 : 4, name != "fp4-g128", name == "razer-fp3-g128" ? 4.0 : 6.0};
  PackedTensor t = blank(name, l);
  double amax = amax_of(x.data(), int64_t(x.size()));
  float gs = amax > g.level_max ? float(amax / g.level_max) : 1.0f;
  t.global_scale = gs;
  if (g.special) t.sv_a = float(a), t.sv_b = float(b);
  std::vector<int> codes(size_t(l.rows * l.nblocks() * l.block), 0);
  each_block(x, l, [&](int64_t r, int64_t blk, const float* v, int64_t n) {
    double bmax = amax_of(v, n);
    int word = 0;
    if (bmax > 0) {
      const double svs[4] = {a, -a, b, -b};
      double best = 0;
      for (int k = 0; k < (g.special ? 4 : 1); ++k) {
        std::vector<int> trial(static_cast<size_t>(n));
        int w = 0;
        double err = group_fit(g, v, n, bmax, gs, svs[k], trial.data(), &w);
        if (k == 0 || err < best) {
          best = err, word = w | (k >= 2 ? 0x4000 : 0) | (k % 2 ? 0x8000 : 0);
          std::copy(trial.begin(), trial.end(), &codes[size_t((r * l.nblocks() + blk) * l.block)]);
        }
      }
    }
    put_bytes(t.scales, &word, 2);
  });
  t.qweight = g.bits == 4 ? pack4(codes) : pack3(codes);
  return t;
}

int default_block(std::string_view f) {
  if (f == "mxfp4") return 32;
  if (f == "nf4") return 64;
  if (f.starts_with("nvfp4")) return 16;
  return 128;
}

}  // namespace

double e4m3_value(int c) {
  if ((c & 0x7F) == 0x7F) return NAN;
  double v = minifloat((c >> 3) & 15, c & 7, 3, 7);
  return c & 0x80 ? -v : v;
}
double e3m3_value(int c) { return minifloat(c >> 3, c & 7, 3, 3); }
double e8m0_value(int c) { return std::ldexp(1.0, c - 127); }
double fp16_value(int c) {
  double v = minifloat((c >> 10) & 31, c & 1023, 10, 15);
  return c & 0x8000 ? -v : v;
}
double fp4_value(int c) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return c & 8 ? -mag[c & 7] : mag[c & 7];
}
double fp3_value(int c) {
  static const double mag[4] = {0, 1, 2, 4};
  return c & 4 ? -mag[c & 3] : mag[c & 3];
}

PackedTensor quantize(std::string_view f, const std::vector<float>& x, int64_t rows, int64_t cols,
                      const Options& opt) {
  Layout l{rows, cols, opt.block ? opt.block : default_block(f)};
  if (f == "fp32" || f == "fp16" || f == "bf16") return plain(f, x, l);
  if (f == "fp8-e4m3") return fp8_rows(x, l);
  if (f == "nestedfp" || f == "nestedfp8") return nested(f, x, l);
  if (f == "int4-g128") return int4(x, l);
  if (f == "nf4") return nf4(x, l);
  if (f == "mxfp4") return mxfp4(x, l);
  if (f == "nvfp4" || f == "nvfp4-4over6") return nvfp4(f, x, l);
  double a = opt.sv_a, b = opt.sv_b;
  if (f == "nvfp4-razer") return nvfp4_razer(x, l, a ? a : 5, b ? b : 8);
  if (f == "nvfp4-razer-act") return nvfp4_razer_act(x, l, a ? a : 5);
  if (f == "fp4-g128") return group_fp(f, x, l, 0, 0);
  if (f == "razer-fp4-g128") return group_fp(f, x, l, a ? a : 5, b ? b : 8);
  if (f == "razer-fp3-g128") return group_fp(f, x, l, a ? a : 3, b ? b : 6);
  throw std::runtime_error("reference: unknown format " + std::string(f));
}

std::vector<float> dequantize(const PackedTensor& t) {
  std::string_view f = t.format;
  std::vector<float> out(size_t(t.rows * t.cols));
  int64_t nb = t.block ? (t.cols + t.block - 1) / t.block : 1;
  for (int64_t r = 0; r < t.rows; ++r) {
    for (int64_t c = 0; c < t.cols; ++c) {
      size_t i = size_t(r * t.cols + c);
      int64_t b = t.block ? c / t.block : 0, bi = r * nb + b;       // block index
      size_t e = size_t(r * nb * t.block + c);                      // element slot (blocked formats)
      double v = 0;
      if (f == "fp32") {
        std::memcpy(&out[i], &t.qweight[4 * i], 4);
        continue;
      } else if (f == "fp16") {
        v = fp16_value(get_u16(t.qweight, i));
      } else if (f == "bf16") {
        v = nibble::bf16_to_float(uint16_t(get_u16(t.qweight, i)));
      } else if (f == "fp8-e4m3") {
        v = e4m3_value(t.qweight[i]) * get_f32(t.scales, size_t(r));
      } else if (f == "nestedfp") {
        // The FP16 word whose low byte is L and whose E4M3 rounding is U (unique: words that
        // share L are two E4M3 steps apart).
        int u = t.qweight[i] & 0x7F, w = -1;
        for (int top = 0; top < 64 && w < 0; ++top) {
          int cand = (top << 8) | t.aux[i];
          if (nearest_even_sorted(e4m3_pos(), fp16_value(cand) * 256.0) == u) w = cand;
        }
        v = w < 0 ? NAN : fp16_value(w | ((t.qweight[i] & 0x80) << 8));
      } else if (f == "nestedfp8") {
        v = e4m3_value(t.qweight[i]) / 256.0;
      } else if (f == "int4-g128") {
        int zb = (nb + 1) / 2;
        int z = (t.aux[size_t(r * zb + b / 2)] >> (4 * (b % 2))) & 15;
        v = (unpack4(t.qweight, e) - z) * fp16_value(get_u16(t.scales, size_t(bi)));
      } else if (f == "nf4") {
        static const float levels[16] = {-1.0f, -0.6961928009986877f, -0.5250730514526367f,
                                         -0.39491748809814453f, -0.28444138169288635f,
                                         -0.18477343022823334f, -0.09105003625154495f, 0.0f,
                                         0.07958029955625534f, 0.16093020141124725f,
                                         0.24611230194568634f, 0.33791524171829224f,
                                         0.44070982933044434f, 0.5626170039176941f,
                                         0.7229568362236023f, 1.0f};
        v = double(levels[unpack4(t.qweight, e)]) * get_f32(t.scales, size_t(bi));
      } else if (f == "mxfp4") {
        v = fp4_value(unpack4(t.qweight, e)) * e8m0_value(t.scales[size_t(bi)]);
      } else if (f == "nvfp4" || f == "nvfp4-4over6") {
        v = fp4_value(unpack4(t.qweight, e)) * e4m3_value(t.scales[size_t(bi)]) * t.global_scale;
      } else if (f == "nvfp4-razer" || f == "nvfp4-razer-act") {
        int byte = t.scales[size_t(bi)], code = unpack4(t.qweight, e);
        bool act = f == "nvfp4-razer-act";
        double s = act ? e4m3_value(byte & 0x7F) : e3m3_value(byte & 0x3F);
        double sv = (act || !(byte & 0x40) ? t.sv_a : t.sv_b) * (byte & 0x80 ? -1 : 1);
        v = (code == 8 ? sv : fp4_value(code)) * s * t.global_scale;
      } else {  // group formats
        int word = get_u16(t.scales, size_t(bi));
        bool fp3 = f == "razer-fp3-g128", special = f != "fp4-g128";
        int code = fp3 ? unpack3(t.qweight, e) : unpack4(t.qweight, e);
        double s = fp16_value(special ? word & 0x3FFF : word);
        double sv = (word & 0x4000 ? t.sv_b : t.sv_a) * (word & 0x8000 ? -1 : 1);
        double val = special && code == (fp3 ? 4 : 8) ? sv : fp3 ? fp3_value(code) : fp4_value(code);
        v = val * s * t.global_scale;
      }
      out[i] = float(v);
    }
  }
  return out;
}

}  // namespace ref

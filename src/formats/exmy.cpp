// The generic ExMy minifloat codec of codec.h.
#include <cmath>
#include <string>

#include "nibble/codec.h"
#include "nibble/error.h"

namespace nibble {
namespace {

struct Fields {
  uint32_t sign, exp, man;
};

Fields split(const ExMy& t, uint32_t code) {
  uint32_t mag_bits = uint32_t(t.ebits + t.mbits);
  uint32_t sign = t.is_signed ? (code >> mag_bits) & 1u : 0u;
  uint32_t mag = code & ((1u << mag_bits) - 1u);
  return {sign, mag >> t.mbits, mag & ((1u << t.mbits) - 1u)};
}

bool has_subnormals(const ExMy& t) { return t.specials != Specials::E8M0; }

}  // namespace

bool ExMy::is_nan(uint32_t code) const {
  Fields f = split(*this, code);
  uint32_t emax = (1u << ebits) - 1u, mmax = (1u << mbits) - 1u;
  switch (specials) {
    case Specials::IEEE: return f.exp == emax && f.man != 0;
    case Specials::FN: return f.exp == emax && f.man == mmax;
    case Specials::E8M0: return f.exp == emax;
    case Specials::None: return false;
  }
  return false;
}

double ExMy::decode(uint32_t code) const {
  Fields f = split(*this, code);
  uint32_t emax = (1u << ebits) - 1u;
  double v;
  if (is_nan(code)) {
    v = NAN;
  } else if (specials == Specials::IEEE && f.exp == emax) {
    v = INFINITY;
  } else if (f.exp == 0 && has_subnormals(*this)) {
    v = std::ldexp(double(f.man), 1 - bias - mbits);
  } else {
    v = std::ldexp(double((1u << mbits) + f.man), int(f.exp) - bias - mbits);
  }
  return f.sign ? -v : v;
}

uint32_t ExMy::max_finite_code() const {
  uint32_t emax = (1u << ebits) - 1u, mmax = (1u << mbits) - 1u;
  switch (specials) {
    case Specials::IEEE: return ((emax - 1u) << mbits) | mmax;
    case Specials::FN: return (emax << mbits) | (mmax - 1u);
    case Specials::E8M0: return emax - 1u;
    case Specials::None: break;
  }
  return (emax << mbits) | mmax;
}

uint32_t ExMy::encode(double x) const {
  if (!std::isfinite(x)) throw Error(std::string(name) + ": cannot encode NaN or Inf");
  if (!is_signed && x < 0) throw Error(std::string(name) + ": cannot encode a negative value");
  uint32_t sign = (is_signed && std::signbit(x)) ? 1u << (ebits + mbits) : 0u;
  double a = std::fabs(x);
  uint32_t top = max_finite_code();
  if (a >= decode(top)) return sign | top;
  if (a == 0) return sign;  // E8M0 has no zero: code 0 is its smallest value
  // The code magnitude is an integer that grows by one per representable step, so rounding
  // a / quantum to the nearest integer (ties to even) rounds to the nearest code (ties to even).
  int first_normal_field = has_subnormals(*this) ? 1 : 0;
  int emin = first_normal_field - bias;  // unbiased exponent of the smallest normal binade
  int e = std::ilogb(a);
  double steps;
  uint32_t base;
  if (e < emin) {
    if (!has_subnormals(*this)) return 0u;
    steps = std::ldexp(a, mbits - emin);  // subnormal: code magnitude = a / 2^(emin - mbits)
    base = 0;
  } else {
    steps = std::ldexp(a, mbits - e) - double(1u << mbits);  // mantissa steps within the binade
    base = uint32_t(e - emin + first_normal_field) << mbits;
  }
  double whole = std::floor(steps), frac = steps - whole;
  uint32_t code = base + uint32_t(whole);
  if (frac > 0.5 || (frac == 0.5 && (code & 1u))) ++code;
  if (code > top) code = top;
  return sign | code;
}

uint32_t int4_encode(double x, double s, uint32_t z) {
  double q = std::nearbyint(x / s) + double(z);
  return uint32_t(q < 0 ? 0 : q > 15 ? 15 : q);
}

}  // namespace nibble

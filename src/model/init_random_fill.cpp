// The random values of init_random: a xoshiro256++ stream per chunk of kChunk elements, seeded by
// splitmix64 from (seed, tensor name, chunk), normals by Box-Muller, Student-t(4) outliers as
// Z / sqrt(chi2_4 / 4) with chi2_4 = -2 ln(U1 U2).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "model/init_random_parts.h"
#include "nibble/error.h"
#include "nibble/half.h"

namespace nibble::init_random_detail {
namespace {

constexpr float kSigma = 0.02f;        // linears and embeddings
constexpr float kNormSigma = 0.05f;    // around 1 for RMSNorm weights
constexpr uint64_t kOutlierMask = 1023;  // low bits all zero: 1/1024 of linear weights are outliers
constexpr float kOutlierScale = 2.0f * kSigma;

uint64_t mix64(uint64_t z) {  // the splitmix64 finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t splitmix64(uint64_t& x) { return mix64(x += 0x9E3779B97F4A7C15ull); }

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

class Xoshiro256pp {
 public:
  explicit Xoshiro256pp(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[0] + s_[3], 23) + s_[0];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0], s_[3] ^= s_[1], s_[1] ^= s_[2], s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in (0, 1): the top 24 bits, offset by half a step (never 0, so log is finite).
  static float open01(uint64_t r) { return (float(r >> 40) + 0.5f) * 0x1p-24f; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

float student_t4(float z, Xoshiro256pp& g) {
  const float u1 = Xoshiro256pp::open01(g.next()), u2 = Xoshiro256pp::open01(g.next());
  const float chi2 = -2.0f * std::log(u1 * u2);
  return z / std::sqrt(chi2 / 4.0f);
}

// One chunk as float: n <= kChunk values.
void chunk_values(Spread spread, uint64_t stream_seed, int64_t n, float* v) {
  Xoshiro256pp g(stream_seed);
  for (int64_t i = 0; i < n; i += 2) {
    const uint64_t r1 = g.next(), r2 = g.next();
    const float rad = std::sqrt(-2.0f * std::log(Xoshiro256pp::open01(r1)));
    const float ang = 2.0f * std::numbers::pi_v<float> * Xoshiro256pp::open01(r2);
    const float z[2] = {rad * std::cos(ang), rad * std::sin(ang)};
    const uint64_t tail_bits[2] = {r1, r2};
    for (int k = 0; k < 2 && i + k < n; ++k) {
      float x;
      switch (spread) {
        case Spread::norm: x = 1.0f + kNormSigma * z[k]; break;
        case Spread::embedding: x = kSigma * z[k]; break;
        default:
          x = (tail_bits[k] & kOutlierMask) == 0 ? kOutlierScale * student_t4(z[k], g) : kSigma * z[k];
      }
      v[i + k] = x;
    }
  }
}

void store(const float* v, int64_t n, DType dtype, uint8_t* out) {
  switch (dtype) {
    case DType::F32: std::memcpy(out, v, size_t(n) * 4); return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = float_to_bf16(v[i]);
        std::memcpy(out + 2 * i, &b, 2);
      }
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = float_to_half(v[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    default: return;  // checked by fill_random
  }
}

}  // namespace

int64_t RandomTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void fill_random(const RandomTensor& t, uint64_t seed, int64_t first, int64_t n, DType dtype, uint8_t* out) {
  const int64_t end = std::min(first + n, t.numel());
  const int64_t nchunks = (end - first + kChunk - 1) / kChunk;
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    throw Error(std::string("init-random: unsupported dtype ") + dtype_name(dtype));
  if (first % kChunk != 0) throw Error("init-random: fill must start on a chunk boundary");
  const uint64_t tensor_key = mix64(seed ^ mix64(fnv1a(t.name)));
  const size_t esize = dtype_size(dtype);
#pragma omp parallel
  {
    std::vector<float> v(static_cast<size_t>(kChunk));
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nchunks; ++c) {
      const int64_t e0 = first + c * kChunk, len = std::min(kChunk, end - e0);
      chunk_values(t.spread, mix64(tensor_key + 0x9E3779B97F4A7C15ull * uint64_t(e0 / kChunk + 1)), len, v.data());
      store(v.data(), len, dtype, out + size_t(c * kChunk) * esize);
    }
  }
}

}  // namespace nibble::init_random_detail

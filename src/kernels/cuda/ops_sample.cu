// Sampling on the device without a sort. One CTA per row:
//   1. the max logit; e[i] = 2^((z[i] - max) * log2(e) / temperature), Z = sum e, and the mass of
//      e >= 2^-s for a few s (shift_of);
//   2. from those, a threshold theta = 2^-s low enough that the tokens with e >= theta surely hold
//      the nucleus (or, without top-p, the drawn token): those candidates are compacted into a
//      list (shared memory when short), and everything below works on that list;
//   3. top-p: bisection over the bit patterns of the positive floats e (ordered like their values)
//      finds the cut value tau, the largest with mass(e >= tau) >= top_p * Z; every token above
//      tau is kept, and of the tokens equal to tau the lowest ids, as many as the mass still needs;
//   4. the draw: r = u * kept mass; a second bisection finds the value sigma of the token where
//      the descending-order cumulative mass first exceeds r, and among the tokens equal to sigma
//      (in id order) the one that r falls on.
// Sums are FP64, so the choice equals a float64 reference except within ~1e-6 (the FP32
// exponentials) of a boundary.
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kThreads = 1024;
constexpr int kListCap = 4096;     // candidates kept in shared memory
// Candidate thresholds 2^-s (then 0: every token); each costs a compare and an add per token.
constexpr int kNumShifts = 7;
__device__ constexpr int shift_of(int q) {
  constexpr int s[kNumShifts] = {0, 1, 2, 4, 7, 12, 20};
  return s[q];
}
constexpr uint32_t kOneBits = 0x3F800000u;  // 1.0f: the largest e

struct RowScratch {
  ArgMax arg[32];
  double sum[32];
  int count[32];
  int n;
};

struct CandList {
  const int* id;
  const float* e;
  int n;
};

// sum of e over the candidates with bits(e) >= thr.
__device__ double mass_at_least(const CandList& c, uint32_t thr, RowScratch& sm) {
  double s = 0;
  for (int i = threadIdx.x; i < c.n; i += kThreads) {
    const float v = c.e[i];
    if (__float_as_uint(v) >= thr) s += v;
  }
  return block_sum(s, sm.sum);
}

__device__ int count_equal(const CandList& c, float val, RowScratch& sm) {
  int n = 0;
  for (int i = threadIdx.x; i < c.n; i += kThreads) n += c.e[i] == val;
  return block_sum(n, sm.count);
}

// How many candidates have e == val and id <= x.
__device__ int count_equal_upto(const CandList& c, float val, int x, RowScratch& sm) {
  int n = 0;
  for (int i = threadIdx.x; i < c.n; i += kThreads) n += c.e[i] == val && c.id[i] <= x;
  return block_sum(n, sm.count);
}

// The j-th (0-based, in id order) token with e == val (the list is unordered: bisection on the
// id); -1 if there are not that many.
__device__ int nth_equal(const CandList& c, float val, int j, int V, RowScratch& sm) {
  if (j < 0 || count_equal(c, val, sm) <= j) return -1;
  int lo = -1, hi = V - 1;  // count(lo) <= j < count(hi)
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (count_equal_upto(c, val, mid, sm) > j)
      hi = mid;
    else
      lo = mid;
  }
  return hi;
}

// Bisection over bit patterns keeping pred(lo) true and pred(hi) false, where pred(b) is
// mass_at_least(b) >= target (strict: > target); the caller knows both ends hold. Returns the final
// lo (the value of an actual token, as the mass only changes at those) and *mass_hi, the mass
// strictly above it.
__device__ uint32_t bisect(const CandList& c, uint32_t lo, uint32_t hi, double target, bool strict,
                           double* mass_hi, RowScratch& sm) {
  double m_hi = 0;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const double m = mass_at_least(c, mid, sm);
    if (strict ? m > target : m >= target)
      lo = mid;
    else
      hi = mid, m_hi = m;
  }
  *mass_hi = m_hi;
  return lo;
}

// The bits of the largest threshold 2^-shift_of(q) whose mass (mass[q]) reaches need, with a 1%
// margin over the FP32 per-thread sums; 0 (every token) if none does.
__device__ uint32_t pick_theta(const double (&mass)[kNumShifts], double need) {
  for (int q = 0; q < kNumShifts; ++q)
    if (mass[q] >= need * 1.01) return uint32_t(127 - shift_of(q)) << 23;
  return 0;
}

// Appends (i, e[i]) for every token with bits(e) >= theta to (ids, es) in any order; returns the
// count. Warp-uniform loop: a warp scan gives each lane its slots, one atomic per warp.
template <class E>
__device__ int compact(const float* z, int V, uint32_t theta, E&& ev, int* ids, float* es, RowScratch& sm) {
  const int lane = threadIdx.x & 31;
  if (threadIdx.x == 0) sm.n = 0;
  __syncthreads();
  for (int base = 0; base < V; base += 4 * kThreads) {
    float v[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = base + q * kThreads + threadIdx.x;
      v[q] = i < V ? z[i] : -INFINITY;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = base + q * kThreads + threadIdx.x;
      const float e = ev(v[q]);
      const bool take = i < V && __float_as_uint(e) >= theta;
      const unsigned ballot = __ballot_sync(0xffffffffu, take);
      int slot = 0;
      if (lane == 0 && ballot) slot = atomicAdd(&sm.n, __popc(ballot));
      slot = __shfl_sync(0xffffffffu, slot, 0) + __popc(ballot & ((1u << lane) - 1));
      if (take) ids[slot] = i, es[slot] = e;
    }
  }
  __syncthreads();
  return sm.n;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* logits, int V, const float* temperature, const float* top_p, const float* u,
                  int32_t* out, int* ws_ids, float* ws_e) {
  __shared__ RowScratch sm;
  __shared__ int s_ids[kListCap];
  __shared__ float s_e[kListCap];
  const int b = blockIdx.x;
  const float* z = logits + int64_t(b) * V;
  ArgMax best{-INFINITY, 0x7fffffff};
  row_foreach(z, V, [&](int i, float v) { best = better(best, ArgMax{v, i}); });
  best = block_argmax(best, sm.arg);
  const float temp = temperature[b];
  if (!(temp > 0) || best.i == 0x7fffffff || best.v == -INFINITY) {  // greedy (or nothing to sample)
    if (threadIdx.x == 0) out[b] = best.i == 0x7fffffff ? 0 : best.i;
    return;
  }
  const float k = 1.4426950408889634f / temp, m = best.v;
  auto ev = [k, m](float v) { return v == -INFINITY ? 0.0f : exp2f((v - m) * k); };
  double Z = 0;
  float part[kNumShifts] = {};
  row_foreach(z, V, [&](int, float v) {
    const float e = ev(v);
    const int ef = int(__float_as_uint(e) >> 23);
    Z += e;
#pragma unroll
    for (int q = 0; q < kNumShifts; ++q) part[q] += ef >= 127 - shift_of(q) ? e : 0.0f;
  });
  Z = block_sum(Z, sm.sum);
  double mass[kNumShifts];
#pragma unroll
  for (int q = 0; q < kNumShifts; ++q) mass[q] = block_sum(double(part[q]), sm.sum);

  const float p = top_p[b];
  const bool nucleus = p < 1;
  const double p_target = double(fmaxf(p, 0.0f)) * Z;
  const uint32_t theta = pick_theta(mass, nucleus ? p_target : double(u[b]) * Z);
  int* ids = ws_ids + int64_t(b) * V;
  float* es = ws_e + int64_t(b) * V;
  CandList c{ids, es, compact(z, V, theta, ev, ids, es, sm)};
  if (c.n <= kListCap) {
    for (int i = threadIdx.x; i < c.n; i += kThreads) s_ids[i] = ids[i], s_e[i] = es[i];
    __syncthreads();
    c.id = s_ids, c.e = s_e;
  }

  // The kept set: e > tau, plus the first n_ties tokens equal to tau.
  uint32_t tau = theta;
  int n_ties = V;
  double kept = Z;
  if (nucleus) {
    double above = 0;
    tau = bisect(c, theta, kOneBits + 1, p_target, false, &above, sm);
    const float tv = __uint_as_float(tau);
    const double need = ceil((p_target - above) / tv);
    n_ties = int(fmin(fmax(need, 1.0), double(count_equal(c, tv, sm))));
    kept = above + n_ties * double(tv);
  }

  const double r = double(u[b]) * kept;
  double above = 0;
  const uint32_t sigma = bisect(c, tau, kOneBits + 1, r, true, &above, sm);
  const float sv = __uint_as_float(sigma);
  const int all_ties = count_equal(c, sv, sm);
  const int ties = sigma == tau ? min(n_ties, all_ties) : all_ties;
  const int j = int(fmin(fmax(floor((r - above) / sv), 0.0), double(ties - 1)));
  const int id = nth_equal(c, sv, j, V, sm);
  if (threadIdx.x == 0) out[b] = id < 0 ? best.i : id;
}

}  // namespace

size_t sample_workspace_bytes(int B, int V) {
  require(B >= 0 && V > 0, "sample_workspace_bytes", "bad shape B=" + std::to_string(B) + " V=" + std::to_string(V));
  return size_t(B) * size_t(V) * (sizeof(int) + sizeof(float));
}

void sample(const float* logits, int B, int V, const float* temperature, const float* top_p, const float* u,
            int32_t* out, void* workspace, cudaStream_t stream) {
  const char* fn = "sample";
  require(B >= 0 && V > 0, fn, "bad shape B=" + std::to_string(B) + " V=" + std::to_string(V));
  if (B == 0) return;
  require_ptr(logits, fn, "logits"), require_ptr(temperature, fn, "temperature"), require_ptr(top_p, fn, "top_p");
  require_ptr(u, fn, "u"), require_ptr(out, fn, "out"), require_ptr(workspace, fn, "workspace");
  int* ids = static_cast<int*>(workspace);
  float* es = reinterpret_cast<float*>(ids + size_t(B) * V);
  sample_kernel<<<B, kThreads, 0, stream>>>(logits, V, temperature, top_p, u, out, ids, es);
  check_launch(fn);
}

}  // namespace nibble::cuda::ops

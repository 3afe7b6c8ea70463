// Sampling on the device without a sort, in three kernels:
//   1. the logit chunk pass (logits_partial.cuh): per chunk of a row its argmax and the sums behind
//      the row's entropy (ReSET's signal); it also clears the row's histogram;
//   2. sample_hist_kernel, over the same chunks: the row's max M and temperature T (ReSET's rule
//      from the entropy when asked), each token's weight e = 2^((z - M) log2(e) / T) in (0, 1] as a
//      fixed-point integer w = floor(e * 2^41), added into a histogram over e's top bits (exponent
//      and 4 mantissa bits: 1/16 octave per bucket; e < 2^-41 weighs nothing);
//   3. sample_pick_kernel, one CTA per row: the cuts (top-k: the largest e with count(e' >= e) >=
//      k; top-p: the largest e with mass(e' >= e) >= top_p * the mass top-k kept; min-p: e >= min_p,
//      as e = p / p_max) and then the draw sigma (the largest e with mass(e' >= e) > u * the kept
//      mass) are radix searches: the histogram's suffix sums give the bucket, that bucket's tokens
//      are listed (one pass over the row), and two histogram levels over the list's lower bits give
//      the exact value. Of the tokens equal to a cut the lowest ids are kept, as many as the count
//      or mass still needs; of those equal to sigma, the one that the draw falls on in id order.
// The sums are integers (exact, whatever the order of additions), so the choice is the same on
// every run and equals a float64 reference except within ~1e-7 of a boundary (the FP32
// exponentials; a token weighs up to 2^-41 less than its e).
#include <climits>

#include "logits_partial.cuh"
#include "nibble/cuda/ops.h"
#include "ops_common.cuh"

namespace nibble::cuda::ops {
using namespace detail;

namespace {

constexpr int kHistThreads = 256;
constexpr int kPickThreads = 1024;
constexpr int kListCap = 2048;  // a bucket's tokens kept in shared memory (else in the workspace)

constexpr float kFixedScale = 0x1p41f;  // w = floor(e * 2^41) >= 1 exactly when e >= 2^-41
constexpr int kMinExp = 127 - 41;        // the biased exponent of 2^-41: bucket 0
constexpr int kFracBits = 4;             // level-1 buckets per octave: 2^kFracBits
constexpr int kShift1 = 23 - kFracBits;  // level 1: bits >> 19
constexpr int kBuckets = ((127 - kMinExp) << kFracBits) + 1;  // up to e = 1.0
constexpr int kShift2 = 9;                                    // level 2: bits 18..9, level 3: 8..0
constexpr int kBins2 = 1 << (kShift1 - kShift2), kBins3 = 1 << kShift2;
static_assert(kBuckets <= kPickThreads && kBins2 <= kPickThreads, "one thread per bin in the scans");
constexpr int kHistPerRow = 2 * kBuckets;  // per row: the weights' sums, then the token counts

// A token's log2(e) and e; both kernels compute them with these same operations.
__device__ __forceinline__ float token_t(float z, float m, float k) { return (z - m) * k; }
__device__ __forceinline__ float token_e(float z, float m, float k) { return exp2f(token_t(z, m, k)); }
__device__ __forceinline__ uint64_t weight(float e) { return __float2ull_rz(e * kFixedScale); }
// e's level-1 bucket: in [0, kBuckets) for the tokens that weigh (e in [2^-41, 1]); negative for
// lighter ones and 0, above for NaN.
__device__ __forceinline__ int bucket_of(float e) { return int(__float_as_uint(e) >> kShift1) - (kMinExp << kFracBits); }
__device__ __forceinline__ bool weighs(int bucket) { return unsigned(bucket) < unsigned(kBuckets); }
__device__ __forceinline__ uint32_t bucket_bits(int b) { return uint32_t(b + (kMinExp << kFracBits)) << kShift1; }

// Exact sums of weights (<= 2^41 each) in shared memory with 32-bit atomics: four 12-bit parts per
// bin, each part's sum below 2^32 for up to 2^20 tokens. h holds 4 * n words.
__device__ __forceinline__ void fixed_add(uint32_t* h, int n, int bin, uint64_t w) {
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint32_t part = uint32_t(w >> (12 * p)) & 0xFFFu;
    if (part) atomicAdd(&h[p * n + bin], part);
  }
}
__device__ __forceinline__ uint64_t fixed_get(const uint32_t* h, int n, int bin) {
  uint64_t s = 0;
#pragma unroll
  for (int p = 0; p < 4; ++p) s += uint64_t(h[p * n + bin]) << (12 * p);
  return s;
}

struct RowState {
  ArgMax best;
  float entropy, temp;
};

// One warp: the row's max, argmax, entropy and temperature.
__device__ RowState row_state(const Partial* parts, int chunks, const SampleRow& r, SampleRule rule) {
  const RowStats s = combine_partials(parts, chunks);
  float t = r.temperature;
  if (rule == SampleRule::entropy && !(double(s.entropy) >= r.threshold)) t = r.t_low;
  return {s.best, s.entropy, t};
}

__device__ inline bool sampled(const RowState& s) { return s.temp > 0 && s.best.i != 0x7fffffff; }
// k of token_t: log2(e) / T, the same value in both kernels.
__device__ inline float log2_scale(const RowState& s) { return 1.4426950408889634f / s.temp; }

__global__ void __launch_bounds__(kHistThreads)
    sample_hist_kernel(const float* logits, int V, int chunk, const SampleRow* rows, SampleRule rule,
                       const Partial* parts, int chunks, uint64_t* hist) {
  pdl_wait();
  pdl_trigger();
  __shared__ uint32_t h[5 * kBuckets];  // four fixed-point parts of the weights, then the counts
  __shared__ RowState st;
  const int b = blockIdx.y;
  if (threadIdx.x < 32) {
    const RowState s = row_state(parts + int64_t(b) * chunks, chunks, rows[b], rule);
    if (threadIdx.x == 0) st = s;
  }
  for (int i = threadIdx.x; i < 5 * kBuckets; i += kHistThreads) h[i] = 0;
  __syncthreads();
  if (!sampled(st)) return;
  const float k = log2_scale(st), m = st.best.v;
  const int c0 = blockIdx.x * chunk, n = max(0, min(chunk, V - c0));
  const bool counts = rows[b].top_k > 0;  // only top-k needs the counts
  row_foreach(logits + int64_t(b) * V + c0, n, [&](int, float z) {
    const float e = token_e(z, m, k);
    const int bk = bucket_of(e);
    if (!weighs(bk)) return;
    fixed_add(h, kBuckets, bk, weight(e));
    if (counts) atomicAdd(&h[4 * kBuckets + bk], 1u);
  });
  __syncthreads();
  uint64_t* row = hist + int64_t(b) * kHistPerRow;
  for (int i = threadIdx.x; i < kBuckets; i += kHistThreads) {
    const uint64_t w = fixed_get(h, kBuckets, i);
    if (w) atomicAdd(reinterpret_cast<unsigned long long*>(&row[i]), w);
    if (h[4 * kBuckets + i]) atomicAdd(reinterpret_cast<unsigned long long*>(&row[kBuckets + i]), h[4 * kBuckets + i]);
  }
}

struct CandList {
  const int* id;
  const float* e;
  int n;
};

struct PickSmem {
  uint64_t s1[kBuckets + 1];  // suffix sums of the row's histogram; s1[kBuckets] = 0
  uint64_t sl[kBins2 + 1];    // suffix sums of a level's bins
  uint32_t h[4 * kBins2];     // a level's fixed-point bins
  uint64_t warp_tot[32];
  int count[32];
  int n;
  int listed, listed_lo, listed_hi;  // the list holds bucket `listed` and buckets [lo, hi]
  RowState st;
  int ids[kListCap];
  float e[kListCap];
};

// a[t] = sum of a[t..n) for t < n, a[n] = 0 (needs blockDim.x >= n). Thread t must be the one that
// wrote a[t] since the last barrier.
__device__ void suffix_sums(uint64_t* a, int n, uint64_t* warp_tot) {
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  uint64_t v = t < n ? a[t] : 0;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t y = __shfl_down_sync(0xffffffffu, v, o);
    if (lane + o < 32) v += y;
  }
  __syncthreads();
  if (lane == 0) warp_tot[w] = v;
  __syncthreads();
  for (int k = w + 1; k < int(blockDim.x >> 5); ++k) v += warp_tot[k];
  if (t < n) a[t] = v;
  if (t == 0) a[n] = 0;
  __syncthreads();
}

// The largest t < n with base + a[t] >= target (> target when strict), a non-increasing: the ones
// that qualify are a prefix. -1 when none does.
__device__ int last_qualifying(const uint64_t* a, int n, uint64_t base, double target, bool strict) {
  bool q = false;
  if (int(threadIdx.x) < n) {
    const double m = double(base + a[threadIdx.x]);
    q = strict ? m > target : m >= target;
  }
  return __syncthreads_count(q) - 1;
}

// log2 of the smallest e in bucket b, widened by 2^-10 (exp2f is within 2 ulp: far less).
__device__ float bucket_t(int b, float widen) { return float(log2(double(__uint_as_float(bucket_bits(b))))) + widen; }

// Lists (in any order) the tokens of the row whose weight is in level-1 bucket `bucket` or in
// buckets [lo, hi] (lo > hi: none): ids and e in the workspace, copied to shared memory when they
// fit. Only the tokens whose exponent t = (z - M) k falls near those buckets' range of log2(e)
// pay for the exponential.
__device__ CandList list_buckets(const float* z, int V, float m, float k, int bucket, int lo, int hi, int* ws_ids,
                                 float* ws_e, PickSmem& sm) {
  const int lane = threadIdx.x & 31;
  const float a_lo = bucket_t(bucket, -0x1p-10f), a_hi = bucket_t(bucket + 1, 0x1p-10f);
  const float r_lo = lo <= hi ? bucket_t(lo, -0x1p-10f) : INFINITY, r_hi = lo <= hi ? bucket_t(hi + 1, 0x1p-10f) : 0;
  auto in_bucket = [&](float zv, float& e) {
    const float t = token_t(zv, m, k);
    if (!((t >= a_lo && t <= a_hi) || (t >= r_lo && t <= r_hi))) return false;
    e = exp2f(t);
    const int b = bucket_of(e);
    return b == bucket || (b >= lo && b <= hi);
  };
  // This thread's first slot for its `cnt` tokens (a warp scan, one atomic per warp); warp-uniform.
  auto slots = [&](int cnt) {
    int incl = cnt;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    int first = 0;
    if (lane == 31) first = atomicAdd(&sm.n, incl);
    return __shfl_sync(0xffffffffu, first, 31) + incl - cnt;
  };
  if (threadIdx.x == 0) sm.n = 0;
  __syncthreads();
  // 16 tokens per thread and round in four 16-byte loads when the row is aligned, then the rest
  // one by one; the loops are warp-uniform.
  const int n4 = (reinterpret_cast<uintptr_t>(z) & 15) == 0 ? V / 4 : 0;
  const float4* z4 = reinterpret_cast<const float4*>(z);
  for (int base = 0; base < n4; base += 4 * kPickThreads) {
    float4 v[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = base + q * kPickThreads + threadIdx.x;
      v[q] = i < n4 ? z4[i] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
    unsigned take = 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float c[4] = {v[q].x, v[q].y, v[q].z, v[q].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float e;
        if (in_bucket(c[j], e)) take |= 1u << (4 * q + j);
      }
    }
    if (!__any_sync(0xffffffffu, take != 0)) continue;
    int slot = slots(__popc(take));
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float c[4] = {v[q].x, v[q].y, v[q].z, v[q].w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (take >> (4 * q + j) & 1)  // e again, the same operations: the same value
          ws_ids[slot] = 4 * (base + q * kPickThreads + int(threadIdx.x)) + j, ws_e[slot++] = token_e(c[j], m, k);
    }
  }
  for (int base = 4 * n4; base < V; base += kPickThreads) {
    const int i = base + threadIdx.x;
    float e = 0;
    const bool take = i < V && in_bucket(z[i], e);
    if (!__any_sync(0xffffffffu, take)) continue;
    const int slot = slots(take);
    if (take) ws_ids[slot] = i, ws_e[slot] = e;
  }
  __syncthreads();
  const int n = sm.n;
  if (n > kListCap) return {ws_ids, ws_e, n};
  for (int i = threadIdx.x; i < n; i += kPickThreads) sm.ids[i] = ws_ids[i], sm.e[i] = ws_e[i];
  __syncthreads();
  return {sm.ids, sm.e, n};
}

// The suffix sums (into sm.sl) of the list's weights (counts: of its tokens) binned by
// (bits >> shift) & (nbins - 1), over the tokens whose bits >> hi_shift equal prefix >> hi_shift.
template <bool kCounts>
__device__ void level_sums(const CandList& c, uint32_t prefix, int hi_shift, int shift, int nbins, PickSmem& sm) {
  for (int i = threadIdx.x; i < 4 * nbins; i += kPickThreads) sm.h[i] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < c.n; i += kPickThreads) {
    const float e = c.e[i];
    const uint32_t bits = __float_as_uint(e);
    if ((bits >> hi_shift) != (prefix >> hi_shift)) continue;
    const int bin = int(bits >> shift) & (nbins - 1);
    if constexpr (kCounts)
      atomicAdd(&sm.h[bin], 1u);
    else
      fixed_add(sm.h, nbins, bin, weight(e));
  }
  __syncthreads();
  if (int(threadIdx.x) < nbins) sm.sl[threadIdx.x] = kCounts ? sm.h[threadIdx.x] : fixed_get(sm.h, nbins, threadIdx.x);
  suffix_sums(sm.sl, nbins, sm.warp_tot);
}

struct Found {
  bool ok;
  uint32_t bits;   // the token value e found
  uint64_t above;  // the weight of the tokens with a larger e
};

// Makes `c` list bucket b (with buckets [next_lo, next_hi]) unless it already holds b.
__device__ void ensure_listed(int b, int next_lo, int next_hi, const float* z, int V, float m, float k, CandList& c,
                              int* ws_ids, float* ws_e, PickSmem& sm) {
  if (b == sm.listed || (b >= sm.listed_lo && b <= sm.listed_hi)) return;
  c = list_buckets(z, V, m, k, b, next_lo, next_hi, ws_ids, ws_e, sm);
  if (threadIdx.x == 0) sm.listed = b, sm.listed_lo = next_lo, sm.listed_hi = next_hi;  // read after barriers
}

// The largest token value x with mass(e >= x) >= target (> target when strict; kCounts: the number
// of tokens with e >= x); leaves `c` listing x's bucket. suffix1: the level-1 suffix sums (sm.s1,
// or the counts' in sm.sl). With next_lo <= next_hi the list also takes buckets [next_lo,
// next_hi], where the next search is expected to land.
template <bool kCounts>
__device__ Found radix_search(const uint64_t* suffix1, double target, bool strict, const float* z, int V, float m,
                              float k, CandList& c, int* ws_ids, float* ws_e, PickSmem& sm, int next_lo = 1,
                              int next_hi = 0) {
  const int b1 = last_qualifying(suffix1, kBuckets, 0, target, strict);
  if (b1 < 0) return {false, 0, 0};
  uint64_t base = suffix1[b1 + 1];
  ensure_listed(b1, next_lo, next_hi, z, V, m, k, c, ws_ids, ws_e, sm);
  const uint32_t pre1 = bucket_bits(b1);
  level_sums<kCounts>(c, pre1, kShift1, kShift2, kBins2, sm);
  const int b2 = last_qualifying(sm.sl, kBins2, base, target, strict);
  if (b2 < 0) return {false, 0, 0};  // not reached: the bucket's sum equals the histogram's
  base += sm.sl[b2 + 1];
  const uint32_t pre2 = pre1 | uint32_t(b2) << kShift2;
  level_sums<kCounts>(c, pre2, kShift2, 0, kBins3, sm);
  const int b3 = last_qualifying(sm.sl, kBins3, base, target, strict);
  if (b3 < 0) return {false, 0, 0};
  base += sm.sl[b3 + 1];
  return {true, pre2 | uint32_t(b3), base};
}

// The weight of the tokens with e >= threshold (bits) in bucket b's part of the list.
__device__ uint64_t list_mass_from(const CandList& c, int b, uint32_t from, PickSmem& sm) {
  unsigned long long s = 0;
  for (int i = threadIdx.x; i < c.n; i += kPickThreads) {
    const float e = c.e[i];
    if (bucket_of(e) == b && __float_as_uint(e) >= from) s += weight(e);
  }
  return block_sum(s, reinterpret_cast<unsigned long long*>(sm.warp_tot));
}

__device__ int count_equal(const CandList& c, float val, PickSmem& sm) {
  int n = 0;
  for (int i = threadIdx.x; i < c.n; i += kPickThreads) n += c.e[i] == val;
  return block_sum(n, sm.count);
}

// The j-th (0-based, in id order) token of the list with e == val; -1 if there are not that many.
// j = 0 (the usual case): the lowest such id. Else bisection on the id.
__device__ int nth_equal(const CandList& c, float val, int j, int V, PickSmem& sm) {
  if (j == 0) {
    if (threadIdx.x == 0) sm.n = INT_MAX;
    __syncthreads();
    int lo = INT_MAX;
    for (int i = threadIdx.x; i < c.n; i += kPickThreads)
      if (c.e[i] == val) lo = min(lo, c.id[i]);
    if (lo != INT_MAX) atomicMin(&sm.n, lo);
    __syncthreads();
    return sm.n == INT_MAX ? -1 : sm.n;
  }
  if (j < 0 || count_equal(c, val, sm) <= j) return -1;
  int lo = -1, hi = V - 1;  // count(id <= lo) <= j < count(id <= hi)
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    int n = 0;
    for (int i = threadIdx.x; i < c.n; i += kPickThreads) n += c.e[i] == val && c.id[i] <= mid;
    if (block_sum(n, sm.count) > j)
      hi = mid;
    else
      lo = mid;
  }
  return hi;
}

__global__ void __launch_bounds__(kPickThreads)
    sample_pick_kernel(const float* logits, int V, const SampleRow* rows, SampleRule rule, const Partial* parts,
                       int chunks, const uint64_t* hist, int* ws_ids, float* ws_e, int32_t* out, float* entropy) {
  pdl_wait();
  pdl_trigger();
  __shared__ PickSmem sm;
  const int b = blockIdx.x;
  const SampleRow r = rows[b];
  if (threadIdx.x < 32) {
    const RowState s = row_state(parts + int64_t(b) * chunks, chunks, r, rule);
    if (threadIdx.x == 0) sm.st = s, sm.listed = -1, sm.listed_lo = 1, sm.listed_hi = 0;
  }
  const uint64_t* row_hist = hist + int64_t(b) * kHistPerRow;
  for (int t = threadIdx.x; t < kBuckets; t += kPickThreads) sm.s1[t] = row_hist[t];
  __syncthreads();
  const RowState st = sm.st;
  if (threadIdx.x == 0 && entropy) entropy[b] = st.entropy;
  const int fallback = st.best.i == 0x7fffffff ? 0 : st.best.i;
  if (!sampled(st)) {  // greedy (or nothing to sample)
    if (threadIdx.x == 0) out[b] = fallback;
    return;
  }
  suffix_sums(sm.s1, kBuckets, sm.warp_tot);
  const double Z = double(sm.s1[0]);
  const float k = log2_scale(st), m = st.best.v;
  const float* z = logits + int64_t(b) * V;
  ws_ids += int64_t(b) * V, ws_e += int64_t(b) * V;
  CandList c{nullptr, nullptr, 0};

  // The kept set, a prefix of the ranking (e descending, then id): every token with e > tau and the
  // first n_ties tokens equal to tau; `kept` is its weight. Top-k, then top-p over what top-k kept,
  // then min-p, as the CPU sampler applies them.
  uint32_t tau = 0;
  int n_ties = V;
  double kept = Z;
  if (r.top_k > 0) {
    if (int(threadIdx.x) < kBuckets) sm.sl[threadIdx.x] = row_hist[kBuckets + threadIdx.x];
    suffix_sums(sm.sl, kBuckets, sm.warp_tot);  // tokens per bucket and above
    if (double(r.top_k) < double(sm.sl[0])) {
      const Found f = radix_search<true>(sm.sl, double(r.top_k), false, z, V, m, k, c, ws_ids, ws_e, sm);
      if (f.ok) {  // f.above: the tokens ranked before the k-th's value
        tau = f.bits;
        n_ties = r.top_k - int(f.above);
        const int b1 = bucket_of(__uint_as_float(tau));
        kept = double(sm.s1[b1 + 1] + list_mass_from(c, b1, tau + 1, sm)) +
               double(n_ties) * double(weight(__uint_as_float(tau)));
      }
    }
  }
  if (r.top_p < 1) {
    const double p_target = fmax(double(fmaxf(r.top_p, 0.0f)) * kept, 1.0);  // at least one unit: a token
    // The kept mass will lie in [p_target, s1[b]] for the cut's bucket b, so the draw in buckets
    // [lo, hi]: when those are few, one pass over the row lists them with the cut's bucket.
    const int b = last_qualifying(sm.s1, kBuckets, 0, p_target, false);
    const int lo = b < 0 ? 1 : last_qualifying(sm.s1, kBuckets, 0, double(r.u) * double(sm.s1[b]), true);
    const int hi = b < 0 ? 0 : last_qualifying(sm.s1, kBuckets, 0, double(r.u) * p_target, true);
    const bool few = lo >= 0 && hi - lo < 4;
    const Found f =
        radix_search<false>(sm.s1, p_target, false, z, V, m, k, c, ws_ids, ws_e, sm, few ? lo : 1, few ? hi : 0);
    if (f.ok) {  // f.bits >= tau: the tokens from tau up weigh at least `kept`
      const double tv = double(weight(__uint_as_float(f.bits)));
      const double need = ceil((p_target - double(f.above)) / tv);
      const int ties = f.bits == tau ? n_ties : count_equal(c, __uint_as_float(f.bits), sm);
      tau = f.bits;
      n_ties = int(fmin(fmax(need, 1.0), double(ties)));
      kept = double(f.above) + n_ties * tv;
    }
  }
  // min-p drops the tokens with e < min_p (e is p / p_max); when it cuts above tau, the kept set
  // becomes every token with e >= min_p.
  if (r.min_p > 0 && r.min_p <= 1 && __uint_as_float(tau) < r.min_p) {
    const int b1 = bucket_of(r.min_p);
    if (weighs(b1)) {
      ensure_listed(b1, 1, 0, z, V, m, k, c, ws_ids, ws_e, sm);
      tau = __float_as_uint(r.min_p), n_ties = V;
      kept = double(sm.s1[b1 + 1] + list_mass_from(c, b1, tau, sm));
    }
  }

  const double target = double(r.u) * kept;
  const Found g = radix_search<false>(sm.s1, target, true, z, V, m, k, c, ws_ids, ws_e, sm);
  if (!g.ok) {  // u >= 1 or NaN
    if (threadIdx.x == 0) out[b] = fallback;
    return;
  }
  const float sv = __uint_as_float(g.bits);
  const int all_ties = count_equal(c, sv, sm);
  const int ties = g.bits == tau ? min(n_ties, all_ties) : all_ties;
  const int j = int(fmin(fmax(floor((target - double(g.above)) / double(weight(sv))), 0.0), double(ties - 1)));
  const int id = nth_equal(c, sv, j, V, sm);
  if (threadIdx.x == 0) out[b] = id < 0 ? fallback : id;
}

struct Layout {
  uint64_t* hist;
  Partial* parts;
  int* ids;
  float* es;
  size_t bytes;
};

Layout layout(void* ws, int B, int V) {
  Layout l{};
  auto* p = static_cast<uint8_t*>(ws);
  size_t off = 0;
  l.hist = reinterpret_cast<uint64_t*>(p + off), off += size_t(B) * kHistPerRow * sizeof(uint64_t);
  l.parts = reinterpret_cast<Partial*>(p + off), off += logit_partials_capacity(B) * sizeof(Partial);
  l.ids = reinterpret_cast<int*>(p + off), off += size_t(B) * size_t(V) * sizeof(int);
  l.es = reinterpret_cast<float*>(p + off), off += size_t(B) * size_t(V) * sizeof(float);
  l.bytes = off;
  return l;
}

void check_shape(const char* fn, int B, int V) {
  require(B >= 0 && V > 0, fn, "bad shape B=" + std::to_string(B) + " V=" + std::to_string(V));
  require(V < (1 << 20), fn, "vocabulary of " + std::to_string(V) + " tokens: at most 2^20 - 1 (the exact sums)");
}

}  // namespace

size_t sample_workspace_bytes(int B, int V) {
  check_shape("sample_workspace_bytes", B, V);
  return layout(nullptr, B, V).bytes;
}

void sample(const float* logits, int B, int V, const SampleRow* rows, SampleRule rule, int32_t* out, float* entropy,
            void* workspace, cudaStream_t stream) {
  const char* fn = "sample";
  check_shape(fn, B, V);
  require(B <= 65535, fn, "rows=" + std::to_string(B) + " above 65535");
  if (B == 0) return;
  require_ptr(logits, fn, "logits"), require_ptr(rows, fn, "rows"), require_ptr(out, fn, "out");
  require_ptr(workspace, fn, "workspace");
  const Layout l = layout(workspace, B, V);
  const Chunking ch = logit_chunking(B, V);
  launch_logit_partials(logits, B, V, ch, l.parts, l.hist, kHistPerRow, stream);
  launch_pdl(sample_hist_kernel, dim3(unsigned(ch.chunks), unsigned(B)), kHistThreads, 0, stream, logits, V, ch.len,
             rows, rule, l.parts, ch.chunks, l.hist);
  launch_pdl(sample_pick_kernel, unsigned(B), kPickThreads, 0, stream, logits, V, rows, rule, l.parts, ch.chunks,
             l.hist, l.ids, l.es, out, entropy);
  check_launch(fn);
}

}  // namespace nibble::cuda::ops

// The one-row GEMV's environment switches (gemv_args.h), read once.
#include <cstdlib>
#include <cstring>


#include "gemv_args.h"

namespace nibble::cuda::detail {
namespace {
bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e && std::strcmp(e, value) == 0;
}
}  // namespace

bool persistent_gemv_enabled() {
  static const bool on = !env_is("NIBBLE_GEMV_PERSISTENT", "0");
  return on;
}

int persistent_gemv_rows_override() {
  static const int rows = env_is("NIBBLE_GEMV_PERSISTENT_ROWS", "4")   ? 4
                          : env_is("NIBBLE_GEMV_PERSISTENT_ROWS", "2") ? 2
                                                                       : 0;
  return rows;
}

// Four chunks per warp and stage where they fit: the first stream kernel (eight consumers, NVFP4,
// H100) measured 4 best against 1 and 2 (docs/perf/gemv-stream-2026-11-23.md); this one ran at 1 on
// the H200 only (docs/perf/ring16-2026-12-01.md).
RingParams ring_params(const RingShape& sh, int NT, int RB, int M, int K) {
  static const int max_cpw = [] {
    const char* e = std::getenv("NIBBLE_RING_CPW");
    const int v = e ? std::atoi(e) : 0;
    return v == 1 || v == 2 ? v : 4;
  }();
  static const int spin = [] {
    const char* e = std::getenv("NIBBLE_RING_SPIN");
    return e ? std::atoi(e) & 3 : 0;
  }();
  RingParams p;
  for (int cpw = max_cpw; cpw >= 1 && p.stages == 0; cpw /= 2) p.cpw = cpw, p.stages = ring_stages(sh, NT, RB, cpw, M, K);
  p.spin = spin;
  return p;
}

bool gemv_norm_fusable(int M, int K, int k_splits) {
  static const bool on = !env_is("NIBBLE_FUSE_NORM", "0");
  return on && persistent_gemv_enabled() && M == 1 && k_splits == 1 && K <= kNormFusedMaxK;
}

}  // namespace nibble::cuda::detail

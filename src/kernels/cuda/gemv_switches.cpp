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

bool gemv_norm_fusable(int M, int K, int k_splits) {
  static const bool on = !env_is("NIBBLE_FUSE_NORM", "0");
  return on && persistent_gemv_enabled() && M == 1 && k_splits == 1 && K <= kNormFusedMaxK;
}

}  // namespace nibble::cuda::detail

#include "nibble/paths.h"

#include <cstdlib>

namespace nibble {

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("NIBBLE_DATA"); env && *env) return env;
  return std::filesystem::path(NIBBLE_SOURCE_DIR) / ".." / "shared" / "data";
}

}  // namespace nibble

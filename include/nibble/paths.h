#pragma once
// Where the shared read-only data lives (../shared/data beside the repo), overridable with
// the NIBBLE_DATA environment variable.
#include <filesystem>

namespace nibble {

std::filesystem::path data_dir();

}  // namespace nibble

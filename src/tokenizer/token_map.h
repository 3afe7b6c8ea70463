#pragma once
// Token text -> id, looked up with string_views without building strings.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace nibble::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

}  // namespace nibble::tok

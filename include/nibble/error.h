#pragma once
// One exception type for every user-facing failure: bad files, bad shapes, bad arguments.
// The message must name the file / tensor / field at fault.
#include <stdexcept>
#include <string>

namespace nibble {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace nibble

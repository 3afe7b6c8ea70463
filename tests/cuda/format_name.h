#pragma once
// Test names from format names ("nvfp4-razer" -> nvfp4_razer), for INSTANTIATE_TEST_SUITE_P.
#include <string>

namespace nibble::cuda::test {

struct FormatName {
  template <class Info>
  std::string operator()(const Info& info) const {
    std::string s = info.param;
    for (auto& c : s) c = c == '-' ? '_' : c;
    return s;
  }
};

}  // namespace nibble::cuda::test

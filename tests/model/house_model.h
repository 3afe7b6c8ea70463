#pragma once
// The house model (../shared/data/models/house-49m), loaded once per test binary.
#include <filesystem>
#include <memory>

#include "nibble/model.h"
#include "nibble/paths.h"

namespace nibble::test {

inline std::filesystem::path house_dir() { return data_dir() / "models" / "house-49m"; }

// The model as stored (bf16 weights, FP32 compute), shared by the tests of one binary.
inline const Model& house_model() {
  static const std::unique_ptr<Model> m = Model::load(house_dir());
  return *m;
}

}  // namespace nibble::test

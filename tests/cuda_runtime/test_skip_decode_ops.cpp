// Batch::skip_decode_ops, the diagnostic behind `bench e2e --in-step`: leaving an op out changes
// the step, the graphs are captured again, and with nothing left out the step is the same bits
// as before. Unknown op names are refused by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_runtime/models.h"
#include "nibble/cuda/runtime.h"
#include "nibble/error.h"

namespace nibble::cuda::test {
namespace {

// The logits of one decode step after a fresh 8-token prefill of slot 0.
std::vector<float> one_step(Batch& b) {
  b.reset(0);
  b.prefill(0, std::vector<int32_t>{5, 9, 13, 2, 7, 1, 4, 8});
  const std::vector<int> slot{0};
  return b.decode(slot, std::vector<int32_t>{3});
}

TEST(SkipDecodeOps, LeftOutOpsChangeTheStepAndNothingLeftOutRestoresIt) {
  const auto m = load(llama_model(768), "nvfp4");
  DeviceModel dm(*m);
  Batch b(dm, {1, 32, true});
  const std::vector<float> full = one_step(b);
  EXPECT_EQ(one_step(b), full);  // the captured graph replays the same bits
  for (const std::string& op : Batch::decode_op_names()) {
    SCOPED_TRACE(op);
    b.skip_decode_ops(std::vector<std::string>{op});
    EXPECT_NE(one_step(b), full);
  }
  b.skip_decode_ops({});
  EXPECT_EQ(one_step(b), full);
  try {
    b.skip_decode_ops(std::vector<std::string>{"rmsnorm"});
    ADD_FAILURE() << "no error for an unknown op";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'rmsnorm'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nibble::cuda::test

// make_sequence: a nibble::Sequence on slot 0 of its own Batch (with the model's KV-cache format),
// for `--device cuda`.
#include "nibble/cuda/runtime.h"

namespace nibble::cuda {
namespace {

class DeviceSequence final : public Sequence {
 public:
  DeviceSequence(const DeviceModel& dm, int max_context)
      : batch_(dm, BatchOptions{1, max_context, true, kv_type(dm.model().options().kv_cache)}) {}

  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits) override {
    static constexpr int kSlot = 0;
    if (tokens.size() == 1)  // a decode step: the graph-captured path
      return batch_.decode(std::span<const int>(&kSlot, 1), tokens);
    return batch_.prefill(kSlot, tokens, all_logits);
  }
  int position() const override { return batch_.position(0); }
  int max_context() const override { return batch_.max_context(); }
  void reset() override { batch_.reset(0); }

 private:
  Batch batch_;
};

}  // namespace

std::unique_ptr<Sequence> make_sequence(const DeviceModel& dm, int max_context) {
  return std::make_unique<DeviceSequence>(dm, max_context);
}

}  // namespace nibble::cuda

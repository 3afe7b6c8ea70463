#pragma once
// Validation shared by the samplers: logits may hold -inf (masked tokens) but never NaN or +inf,
// and at least one must be finite.
#include <cstdint>

namespace nibble::detail {

// The largest logit; throws nibble::Error naming the first bad index.
float checked_max_logit(const float* logits, int64_t n);

}  // namespace nibble::detail

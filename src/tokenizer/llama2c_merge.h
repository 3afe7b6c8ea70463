#pragma once
// llama2.c's BPE-by-score: repeatedly merge the adjacent pair whose concatenation is a token with
// the highest score (leftmost among equal scores; only scores above -1e10, llama2.c's floor),
// until no pair is a token. Done with a heap and a linked list instead of llama2.c's rescans, so
// it is O(n log n) and gives the same ids.
#include <cstdint>
#include <functional>
#include <vector>

namespace nibble::tok {

// `merged(a, b)` is the id of the token spelled a+b, or -1; `score(id)` its score.
void merge_by_score(std::vector<int32_t>& ids, const std::function<int32_t(int32_t, int32_t)>& merged,
                    const std::function<float(int32_t)>& score);

}  // namespace nibble::tok

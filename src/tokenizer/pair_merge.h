#pragma once
// The merge loop both BPE tokenizers share: repeatedly apply the best merge among adjacent pairs
// (lowest priority value first, the leftmost on ties) until no pair merges. A heap of candidates
// and a linked list over the symbols make it O(n log n). Heap entries go stale as neighbours
// merge; an entry is applied only if the pair now at its position still gives the same merge.
//   HF byte-level BPE: priority = the merge's rank.
//   llama2.c: priority = -score of the merged token (only scores above its -1e10 floor merge).
#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

namespace nibble::tok {

struct PairMerge {
  double priority;  // lower merges first
  int32_t new_id;
};

// find(a, b) -> std::optional<PairMerge>: the merge of the adjacent symbols a, b, if any.
template <class Find>
void merge_pairs(std::vector<int32_t>& ids, const Find& find) {
  const int n = int(ids.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    double priority;
    int pos;  // the left symbol; node order is text order, so smaller is further left
    int32_t new_id;
    bool operator>(const Cand& o) const { return priority != o.priority ? priority > o.priority : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> queue;
  auto push = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const std::optional<PairMerge> m = find(ids[pos], ids[next[pos]]))
      queue.push({m->priority, pos, m->new_id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Cand top = queue.top();
    queue.pop();
    const int right = next[top.pos];
    if (!alive[top.pos] || right < 0) continue;
    const std::optional<PairMerge> m = find(ids[top.pos], ids[right]);
    if (!m || m->new_id != top.new_id || m->priority != top.priority) continue;  // stale
    ids[top.pos] = top.new_id;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push(prev[top.pos]);
    push(top.pos);
  }
  size_t k = 0;
  for (int i = 0; i < n; ++i)
    if (alive[i]) ids[k++] = ids[i];
  ids.resize(k);
}

}  // namespace nibble::tok

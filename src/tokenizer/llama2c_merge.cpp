#include "tokenizer/llama2c_merge.h"

#include <queue>

namespace nibble::tok {

void merge_by_score(std::vector<int32_t>& ids, const std::function<int32_t(int32_t, int32_t)>& merged,
                    const std::function<float(int32_t)>& score) {
  constexpr float kFloor = -1e10f;  // llama2.c starts its best score here; it never merges below
  const int n = int(ids.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    float score;
    int pos;  // the left node; node order is text order, so smaller is further left
    int right;
    int32_t left_id, right_id, new_id;
    bool operator<(const Cand& o) const { return score != o.score ? score < o.score : pos > o.pos; }
  };
  std::priority_queue<Cand> queue;
  auto push = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    const int right = next[pos];
    const int32_t id = merged(ids[pos], ids[right]);
    if (id >= 0 && score(id) > kFloor) queue.push({score(id), pos, right, ids[pos], ids[right], id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    // stale when either side has been merged away or changed since the entry was made
    if (!alive[c.pos] || next[c.pos] != c.right || ids[c.pos] != c.left_id ||
        ids[c.right] != c.right_id)
      continue;
    ids[c.pos] = c.new_id;
    alive[c.right] = false;
    next[c.pos] = next[c.right];
    if (next[c.right] >= 0) prev[next[c.right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t k = 0;
  for (int i = 0; i < n; ++i)
    if (alive[i]) ids[k++] = ids[i];
  ids.resize(k);
}

}  // namespace nibble::tok

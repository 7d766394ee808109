#include "text/bpe.h"

#include <algorithm>

namespace h3 {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void BpeMerges::reserve(size_t merges) {
  size_t want = 16;
  while (want < merges * 2) want *= 2;
  if (want <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(want, Slot{kEmpty, {}});
  for (const Slot& s : old)
    if (s.key != kEmpty) slots_[slot_of(s.key)] = s;
}

void BpeMerges::grow() { reserve(std::max<size_t>(16, slots_.size())); }

size_t BpeMerges::slot_of(uint64_t key) const {
  const size_t mask = slots_.size() - 1;
  size_t i = mix(key) & mask;
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask;
  return i;
}

void BpeMerges::add(int32_t left, int32_t right, int32_t merged, uint32_t rank) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pair_key(left, right);
  Slot& s = slots_[slot_of(key)];
  if (s.key == kEmpty) ++size_;
  s = Slot{key, Merge{rank, merged}};
}

const BpeMerges::Merge* BpeMerges::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const Slot& s = slots_[slot_of(pair_key(left, right))];
  return s.key == kEmpty ? nullptr : &s.merge;
}

void BpeMerges::apply(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2 || size_ == 0) return;

  // A doubly linked list over the symbols; a merge keeps the left node and unlinks the right one.
  constexpr int32_t kNone = -1;
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : kNone;
  }

  struct Candidate {
    uint32_t rank;
    int32_t pos;  // node of the left symbol
    int32_t left, right;
  };
  // std heap functions build a max-heap: "a after b" puts the lowest (rank, pos) on top.
  const auto after = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::vector<Candidate> heap;
  heap.reserve(n);
  const auto consider = [&](int32_t pos) {
    const int32_t right_pos = next[pos];
    if (right_pos == kNone) return;
    if (const Merge* m = find(symbols[pos], symbols[right_pos])) {
      heap.push_back(Candidate{m->rank, pos, symbols[pos], symbols[right_pos]});
      std::push_heap(heap.begin(), heap.end(), after);
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));

  std::vector<bool> removed(n, false);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const Candidate c = heap.back();
    heap.pop_back();
    // Stale when either symbol has been merged away or changed since the candidate was pushed.
    if (removed[c.pos]) continue;
    const int32_t right_pos = next[c.pos];
    if (right_pos == kNone || symbols[c.pos] != c.left || symbols[right_pos] != c.right) continue;

    symbols[c.pos] = find(c.left, c.right)->merged;
    removed[right_pos] = true;
    next[c.pos] = next[right_pos];
    if (next[c.pos] != kNone) prev[next[c.pos]] = c.pos;
    if (prev[c.pos] != kNone) consider(prev[c.pos]);
    consider(c.pos);
  }

  size_t out = 0;
  for (int32_t pos = 0; pos != kNone; pos = next[pos]) symbols[out++] = symbols[pos];
  symbols.resize(out);
}

}  // namespace h3

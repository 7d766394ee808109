// Merge-rank BPE over symbol ids (tokenizer.md §5).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace h3 {

class BpeMerges {
 public:
  struct Merge {
    uint32_t rank;   // 0-based position in the merges list: lower merges first
    int32_t merged;  // id of the concatenated symbol
  };

  void reserve(size_t merges);
  // Registers the pair (left, right). A pair listed twice keeps the later rank, as HF tokenizers' map does.
  void add(int32_t left, int32_t right, int32_t merged, uint32_t rank);
  size_t size() const { return size_; }
  const Merge* find(int32_t left, int32_t right) const;

  // Rewrites `symbols` (one word's initial symbol ids) into its final ids: repeatedly merge the adjacent pair
  // of lowest rank, the leftmost one on ties, until no adjacent pair has a rank. O(n log n) with a heap of
  // candidate pairs whose stale entries are skipped when popped.
  void apply(std::vector<int32_t>& symbols) const;

 private:
  struct Slot {
    uint64_t key;  // (left << 32) | right; kEmpty marks a free slot
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  size_t slot_of(uint64_t key) const;
  void grow();

  std::vector<Slot> slots_;  // open addressing, linear probing, power-of-two size, at most half full
  size_t size_ = 0;
};

}  // namespace h3

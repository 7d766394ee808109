#include "util/partial_files.h"

#include <unistd.h>

#include <atomic>
#include <thread>

namespace h3 {

struct PartialPath::Entry {
  std::string path;
  Kind kind;
};

namespace {

// The registered entries; a slot holds null or an entry its PartialPath owns. A handler reads them while the main
// thread registers and unregisters: an unregistration clears its slot, then waits while a removal runs (seq_cst
// both ways: either the removal reads the cleared slot, or the unregistration sees the removal and waits for its
// end), and only then frees the entry.
std::atomic<const PartialPath::Entry*> g_slots[PartialPath::kMaxPartialPaths];
std::atomic<bool> g_removing{false};
static_assert(std::atomic<const PartialPath::Entry*>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

}  // namespace

PartialPath::PartialPath(std::string path, Kind kind) : entry_(new Entry{std::move(path), kind}) {
  for (int i = 0; i < kMaxPartialPaths; ++i) {
    const Entry* empty = nullptr;
    if (g_slots[i].compare_exchange_strong(empty, entry_.get())) {
      slot_ = i;
      return;
    }
  }
}

PartialPath::PartialPath(PartialPath&& other) noexcept : entry_(std::move(other.entry_)), slot_(other.slot_) {
  other.slot_ = -1;
}

PartialPath::~PartialPath() { unregister(); }

void PartialPath::unregister() {
  if (slot_ < 0) return;
  g_slots[slot_].store(nullptr);
  slot_ = -1;
  while (g_removing.load()) std::this_thread::yield();
}

void remove_partial_paths() {
  g_removing.store(true);
  for (auto& slot : g_slots)
    if (const PartialPath::Entry* e = slot.load(); e && e->kind == PartialPath::Kind::File) ::unlink(e->path.c_str());
  // A folder empties when the folders inside it go: passes until one removes nothing.
  for (bool removed = true; removed;) {
    removed = false;
    for (auto& slot : g_slots)
      if (const PartialPath::Entry* e = slot.load(); e && e->kind == PartialPath::Kind::Folder)
        removed = ::rmdir(e->path.c_str()) == 0 || removed;
  }
  g_removing.store(false);
}

}  // namespace h3

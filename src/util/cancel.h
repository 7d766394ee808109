// Cancelling long work: the caller's flag (GenerateCallbacks::cancel) is made current for the thread that runs the
// work (CancelScope), and the models check it between their units of work — DiT blocks, conditioner layers, vision
// blocks, VAE windows, tile batches and blocks, audio VAE blocks, weight tensors while loading, frames while
// writing — through throw_if_cancelled(), so no model signature carries the flag. A check is one relaxed atomic
// load; without a scope it does nothing.
//
// The check runs on the host: on the CPU the work between two checks is done when the flag is read; a GPU backend
// enqueues ahead, so what is already queued (at most until the next download) finishes first.
#pragma once
#include <atomic>

#include "util/error.h"

namespace h3 {

// h3::Cancelled (include/h3/error.h) is thrown when the current cancel flag is raised; whatever was being computed
// is dropped.

// Makes `flag` (null: none) the current thread's cancel flag until the scope ends, then restores the previous one.
class CancelScope {
 public:
  explicit CancelScope(const std::atomic<bool>* flag);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

// Whether the current thread's cancel flag is raised.
bool cancel_requested();
// Throws Cancelled when it is.
void throw_if_cancelled();

}  // namespace h3

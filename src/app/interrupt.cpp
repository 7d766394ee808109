#include "app/interrupt.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace h3::app {

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<bool> g_generating{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGINT handler needs a lock-free flag");

void on_sigint(int) {
  if (g_generating.load() && g_interrupted.load()) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  g_interrupted.store(true);
  if (g_generating.load()) {
    static const char kNote[] = "\nh3: cancelling after the current step (Ctrl-C again to quit now)\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kNote, sizeof kNote - 1);  // async-signal-safe
  }
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read() returns EINTR
  ::sigaction(SIGINT, &sa, nullptr);
}

std::atomic<bool>& interrupt_flag() { return g_interrupted; }

void set_generation_running(bool busy) { g_generating.store(busy); }

}  // namespace h3::app

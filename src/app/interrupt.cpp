#include "app/interrupt.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include <csignal>
#include <cstring>

#include "util/partial_files.h"

namespace h3::app {

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<bool> g_generating{false};
int g_wake[2] = {-1, -1};  // the handler writes a byte to [1]; wait_for_input() polls [0]
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGINT handler needs a lock-free flag");

void on_sigint(int) {
  if (g_generating.load() && g_interrupted.load()) {
    static const char kQuit[] = "\nh3: quitting at once; partial outputs removed\n";
    remove_partial_paths();  // async-signal-safe
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kQuit, sizeof kQuit - 1);
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  g_interrupted.store(true);
  if (g_wake[1] >= 0) {
    const int saved = errno;
    [[maybe_unused]] ssize_t w = ::write(g_wake[1], "i", 1);  // non-blocking: a full pipe already wakes the reader
    errno = saved;
  }
  if (g_generating.load()) {
    static const char kNote[] = "\nh3: cancelling (Ctrl-C again quits at once; no partial output is left either way)\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kNote, sizeof kNote - 1);  // async-signal-safe
  }
}

}  // namespace

void install_interrupt_handler() {
  if (g_wake[0] < 0 && ::pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) g_wake[0] = g_wake[1] = -1;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read() returns EINTR
  ::sigaction(SIGINT, &sa, nullptr);
}

std::atomic<bool>& interrupt_flag() { return g_interrupted; }

void set_generation_running(bool busy) { g_generating.store(busy); }

void clear_interrupt() {
  char buf[64];
  if (g_wake[0] >= 0)
    while (::read(g_wake[0], buf, sizeof buf) > 0) {
    }
  g_interrupted.store(false);
}

bool wait_for_input(int fd) {
  for (;;) {
    if (g_interrupted.load()) return false;
    pollfd p[2] = {{fd, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    const int n = ::poll(p, g_wake[0] >= 0 ? 2 : 1, -1);
    if (n < 0 && errno != EINTR) return true;  // let the read report the problem
    if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) return !g_interrupted.load();
  }
}

}  // namespace h3::app

#include "util/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace h3 {
namespace {
LogLevel initial_level() {
  const char* env = std::getenv("H3_LOG_LEVEL");
  if (!env) return LogLevel::Info;
  if (!std::strcmp(env, "debug")) return LogLevel::Debug;
  if (!std::strcmp(env, "warn")) return LogLevel::Warn;
  if (!std::strcmp(env, "error")) return LogLevel::Error;
  if (!std::strcmp(env, "quiet")) return LogLevel::Quiet;
  return LogLevel::Info;
}
LogLevel g_level = initial_level();
std::mutex g_mutex;
}  // namespace

LogLevel log_level() { return g_level; }
void set_log_level(LogLevel level) { g_level = level; }

void log_write(LogLevel level, const std::string& msg) {
  static const char* names[] = {"debug", "info", "warning", "error", ""};
  std::lock_guard<std::mutex> lock(g_mutex);
  if (level == LogLevel::Info)
    std::fprintf(stderr, "%s\n", msg.c_str());
  else
    std::fprintf(stderr, "h3: %s: %s\n", names[static_cast<int>(level)], msg.c_str());
}

}  // namespace h3

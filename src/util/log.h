// Minimal leveled logging to stderr. H3_LOG_LEVEL=debug|info|warn|error (default info).
#pragma once
#include "util/error.h"

namespace h3 {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Quiet = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, const std::string& msg);

template <typename... Args>
void log_debug(Args&&... a) { if (log_level() <= LogLevel::Debug) log_write(LogLevel::Debug, cat(std::forward<Args>(a)...)); }
template <typename... Args>
void log_info(Args&&... a) { if (log_level() <= LogLevel::Info) log_write(LogLevel::Info, cat(std::forward<Args>(a)...)); }
template <typename... Args>
void log_warn(Args&&... a) { if (log_level() <= LogLevel::Warn) log_write(LogLevel::Warn, cat(std::forward<Args>(a)...)); }

}  // namespace h3

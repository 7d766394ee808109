// `h3 --info -d DIR`: header-only inspection of a snapshot (no tensor payload is read).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace h3 {

struct InspectReport {
  std::string text;                   // the human-readable report
  std::vector<std::string> problems;  // one line per problem (missing shard, truncated file, missing tensor, ...)
};

InspectReport inspect_snapshot(const std::string& dir);

}  // namespace h3

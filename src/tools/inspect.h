// `h3 --info -d DIR`: header-only inspection of a snapshot (no tensor payload is read).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace h3 {

struct InspectReport {
  std::string text;                   // the human-readable report
  std::vector<std::string> problems;  // one line per problem (missing shard, truncated file, missing tensor, ...)
  // The same for scripts (h3 --info --json): {"snapshot", "index", "components": [{"name", "present", "layout",
  // "dir"}], "workflows": [{"name", "available", "missing", "served"}], "device": {...}, "problems": [...]}.
  nlohmann::json json;
};

InspectReport inspect_snapshot(const std::string& dir);

struct Snapshot;
// The components part of that report (tools/inspect_components.cpp): each component's config, checked against its
// weights' headers (io/weights_fit.h), and its weights against the manifest; the schedulers; the canvas rule. Its
// json is the "components" array.
InspectReport inspect_components(const Snapshot& s);

}  // namespace h3

#include "tools/inspect.h"

#include <sstream>

#include "backend/device.h"
#include "parallel/rank_group.h"
#include "h3/h3.h"
#include "io/snapshot.h"
#include "util/error.h"

namespace h3 {

InspectReport inspect_snapshot(const std::string& dir) {
  Snapshot s = Snapshot::discover(dir);
  std::ostringstream out;
  out << cat("MiniMax-H3 snapshot ", dir, s.index_file.empty() ? "" : " (index " + s.index_file + ")") << "\n";
  out << "components:\n";
  InspectReport components = inspect_components(s);
  out << components.text;
  std::vector<std::string>& problems = components.problems;
  out << "workflows:\n";
  nlohmann::json workflows = nlohmann::json::array();
  for (Workflow w : {Workflow::T2VA, Workflow::FL2VA, Workflow::Ref2VA}) {
    auto miss = s.missing_for(w);
    workflows.push_back(
        {{"name", workflow_name(w)}, {"available", miss.empty()}, {"missing", miss}, {"served", workflow_served(w)}});
    std::string m;
    for (const auto& x : miss) m += (m.empty() ? "" : ", ") + x;
    // What the snapshot holds for the workflow, then whether this h3 generates it.
    out << cat("  ", workflow_name(w), ": ", miss.empty() ? "yes" : "no (missing " + m + ")",
               workflow_served(w) ? "" : "; h3 does not serve it yet")
        << "\n";
  }
  const ComputeDevice device = detect_compute_device();
  out << cat("device: ", describe(device)) << "\n";
  out << gpu_group_summary() << "\n";
  if (!problems.empty()) {
    out << cat("problems (", problems.size(), "):") << "\n";
    for (const auto& p : problems) out << "  " << p << "\n";
  }
  const nlohmann::json json = {
      {"snapshot", dir},
      {"index", s.index_file.empty() ? nlohmann::json() : nlohmann::json(s.index_file)},
      {"components", components.json},
      {"workflows", workflows},
      {"device",
       {{"kind", device.cuda ? "cuda" : "cpu"},
        {"name", device.name},
        {"memory_bytes", device.memory_bytes},
        {"description", describe(device)}}},
      {"problems", problems}};
  return {out.str(), problems, json};
}

}  // namespace h3

// The h3 command line: a thin client of libh3.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/inspect.h"
#include "tools/registry.h"
#include "util/error.h"

namespace {

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "h3: %s (see h3 --help)\n", msg.c_str());
  return 2;
}

int run_info(int argc, char** argv) {
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-d" || a == "--model-dir") && i + 1 < argc) dir = argv[++i];
  }
  if (dir.empty()) return usage_error("--info needs the model folder: h3 --info -d DIR");
  h3::InspectReport r = h3::inspect_snapshot(dir);
  std::fputs(r.text.c_str(), stdout);
  return r.problems.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && !std::strcmp(argv[1], "tool")) return h3::run_tool(argc - 2, argv + 2);
    for (int i = 1; i < argc; ++i)
      if (!std::strcmp(argv[i], "--info")) return run_info(argc, argv);
    return usage_error("nothing to do yet");
  } catch (const h3::Error& e) {
    std::fprintf(stderr, "h3: %s\n", e.what());
    return 1;
  }
}

// `h3 tool NAME ...`: the developer tools (parity harness entry points, model utilities), one table.
#pragma once
#include <string>
#include <vector>

namespace h3 {

struct ToolEntry {
  const char* name;
  const char* summary;
  int (*main)(int argc, char** argv);  // argv[0] is the tool's name; returns the exit status
};

const std::vector<ToolEntry>& tools();
// Runs `argv[0]` as a tool (argv[0] = tool name). Unknown names: one line on stderr, status 2.
int run_tool(int argc, char** argv);

int tool_make_tiny_model(int argc, char** argv);

}  // namespace h3

// The option parsing shared by the `h3 tool` entry points: `--name VALUE` pairs (also `--name=VALUE`) and -h/--help.
#pragma once
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace h3 {

struct ToolArgs {
  std::map<std::string, std::string> values;  // option name (with dashes) → value; flags given map to ""
  bool help = false;
  const std::string& get(const std::string& name) const;  // "" when absent
  bool has(const std::string& name) const;                // given, with any value (also "") or as a flag
};

// Parses argv[1..) accepting only `known` options (each takes a value) and `flags` (options without one); options in
// `required` ("--out FILE": the name, then what the message calls its value) must be given unless --help was.
// Returns the first problem as one sentence, or nothing.
std::optional<std::string> parse_tool_args(int argc, char** argv, const std::vector<std::string>& known,
                                           const std::vector<std::string>& required, ToolArgs& out,
                                           const std::vector<std::string>& flags = {});
// What a tool's parsed options call for: exit status 2 after `problem` as one line on `err` ("h3 tool NAME: problem
// (see h3 tool NAME --help)"), 0 after `usage` on `out` for --help, nothing when the tool should run.
std::optional<int> usage_exit_status(std::string_view name, std::string_view usage,
                                     const std::optional<std::string>& problem, bool help, std::ostream& out,
                                     std::ostream& err);
// `--transformer DIR --case FILE --out FILE [--device NAME]`, the arguments of `h3 tool dit` and `h3 tool denoise`.
struct TransformerCaseArgs {
  std::string transformer, case_path, out, device = "auto", precision = "bf16";
  bool help = false;
};
std::optional<std::string> parse_transformer_case_args(int argc, char** argv, TransformerCaseArgs& a);
// Parses them for the tool `name`; on a usage error prints it (exit status 2), on --help prints `usage` (status 0).
// Returns that status, or nothing when the tool should run.
std::optional<int> parse_transformer_case_tool(const char* name, std::string_view usage, int argc, char** argv,
                                               TransformerCaseArgs& a);

// `flag`'s value as a whole number of pixels into `out` when it was given; the usage problem otherwise.
std::optional<std::string> parse_pixels_option(const ToolArgs& t, const std::string& flag, int64_t& out);

// "--device must be cpu, cuda or auto" check shared by the tools that take --device.
std::optional<std::string> check_device_option(const std::string& device);

}  // namespace h3

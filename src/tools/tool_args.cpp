#include "tools/tool_args.h"

#include <algorithm>
#include <iostream>

#include "pipeline/precision.h"
#include "text/quote.h"

namespace h3 {

const std::string& ToolArgs::get(const std::string& name) const {
  static const std::string empty;
  auto it = values.find(name);
  return it == values.end() ? empty : it->second;
}

bool ToolArgs::has(const std::string& name) const { return values.count(name) != 0; }

std::optional<std::string> parse_tool_args(int argc, char** argv, const std::vector<std::string>& known,
                                           const std::vector<std::string>& required, ToolArgs& out,
                                           const std::vector<std::string>& flags) {
  for (int i = 1; i < argc; ++i) {
    std::string opt = argv[i];
    if (opt == "--help" || opt == "-h") {
      out.help = true;
      continue;
    }
    std::optional<std::string> inline_value;
    if (auto eq = opt.find('='); opt.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = opt.substr(eq + 1);
      opt = opt.substr(0, eq);
    }
    if (std::find(flags.begin(), flags.end(), opt) != flags.end()) {
      if (inline_value) return opt + " takes no value";
      out.values[opt] = "";
      continue;
    }
    if (std::find(known.begin(), known.end(), opt) == known.end()) return "unknown option " + opt;
    if (inline_value) {
      out.values[opt] = *inline_value;
    } else {
      if (i + 1 >= argc) return opt + " needs a value";
      out.values[opt] = argv[++i];
    }
  }
  if (out.help) return std::nullopt;
  for (const auto& r : required)
    if (out.get(r.substr(0, r.find(' '))).empty()) return r + " is required";
  return std::nullopt;
}

std::optional<std::string> check_device_option(const std::string& device) {
  if (device.empty() || device == "cpu" || device == "cuda" || device == "auto") return std::nullopt;
  return "--device must be cpu, cuda or auto, got " + quoted_input(device);
}

std::optional<std::string> parse_transformer_case_args(int argc, char** argv, TransformerCaseArgs& a) {
  ToolArgs t;
  auto problem = parse_tool_args(argc, argv, {"--transformer", "--case", "--out", "--device", "--precision"},
                                 {"--transformer DIR", "--case FILE", "--out FILE"}, t);
  if (!problem) problem = check_device_option(t.get("--device"));
  if (!problem && t.has("--precision")) problem = check_precision_word("--precision", t.get("--precision"));
  a.help = t.help;
  a.transformer = t.get("--transformer");
  a.case_path = t.get("--case");
  a.out = t.get("--out");
  if (!t.get("--device").empty()) a.device = t.get("--device");
  if (t.has("--precision")) a.precision = t.get("--precision");
  return problem;
}

std::optional<int> usage_exit_status(std::string_view name, std::string_view usage,
                                     const std::optional<std::string>& problem, bool help, std::ostream& out,
                                     std::ostream& err) {
  if (problem) {
    err << "h3 tool " << name << ": " << *problem << " (see h3 tool " << name << " --help)\n";
    return 2;
  }
  if (help) {
    out << usage;
    return 0;
  }
  return std::nullopt;
}

std::optional<int> parse_transformer_case_tool(const char* name, std::string_view usage, int argc, char** argv,
                                               TransformerCaseArgs& a) {
  const auto problem = parse_transformer_case_args(argc, argv, a);
  return usage_exit_status(name, usage, problem, a.help, std::cout, std::cerr);
}

std::optional<std::string> parse_pixels_option(const ToolArgs& t, const std::string& flag, int64_t& out) {
  if (!t.has(flag)) return std::nullopt;
  const std::string& value = t.get(flag);
  size_t used = 0;
  try {
    out = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == value.size() && !value.empty()) return std::nullopt;
  return flag + " takes a whole number of pixels, got '" + value + "'";
}

}  // namespace h3

#include "text/tokenize_tool.h"

#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "text/tokenizer.h"
#include "util/error.h"

namespace h3 {

namespace {

constexpr std::string_view kUsage = R"(usage: h3 tool tokenize --tokenizer PATH (--text TEXT | --stdin)

Prints the token ids of TEXT as a JSON array on one line, encoded as H3 encodes prompts: nothing is added
before or after; added tokens written in the text (e.g. <|image_pad|>) become their single ids.

  --tokenizer PATH  a tokenizer.json, or a folder holding one (e.g. MODEL/tokenizer)
  --text TEXT       the text to encode (UTF-8)
  --stdin           encode all of standard input instead, byte for byte (a final newline is kept)
  --help            show this help
)";

struct Args {
  std::string tokenizer;
  std::optional<std::string> text;
  bool from_stdin = false;
  bool help = false;
};

// Parses the options; returns an error sentence for bad usage.
std::optional<std::string> parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string_view opt = argv[i];
    std::optional<std::string> inline_value;
    if (const size_t eq = opt.find('='); opt.starts_with("--") && eq != std::string_view::npos) {
      inline_value = std::string(opt.substr(eq + 1));
      opt = opt.substr(0, eq);
    }
    const auto value = [&]() -> std::optional<std::string> {
      if (inline_value) return inline_value;
      if (i + 1 < argc) return std::string(argv[++i]);
      return std::nullopt;
    };
    if (opt == "--help" || opt == "-h") {
      a.help = true;
    } else if (opt == "--stdin") {
      a.from_stdin = true;
    } else if (opt == "--tokenizer" || opt == "--text") {
      const auto v = value();
      if (!v) return std::string(opt) + " needs a value";
      (opt == "--tokenizer" ? a.tokenizer : a.text.emplace()) = *v;
    } else {
      return "unknown option " + std::string(argv[i]);
    }
  }
  if (a.help) return std::nullopt;
  if (a.tokenizer.empty()) return std::string("--tokenizer PATH is required");
  if (a.text.has_value() == a.from_stdin) return std::string("give exactly one of --text TEXT and --stdin");
  return std::nullopt;
}

}  // namespace

int tool_tokenize(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err) {
  Args args;
  if (const auto usage_error = parse(argc, argv, args)) {
    err << "h3 tool tokenize: " << *usage_error << " (see h3 tool tokenize --help)\n";
    return 2;
  }
  if (args.help) {
    out << kUsage;
    return 0;
  }
  try {
    const Tokenizer tokenizer = Tokenizer::from_file(args.tokenizer);
    const std::string text =
        args.from_stdin ? std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) : *args.text;
    const std::vector<int32_t> ids = tokenizer.encode(text);
    std::ostringstream line;
    line << '[';
    for (size_t i = 0; i < ids.size(); ++i) line << (i ? "," : "") << ids[i];
    line << "]\n";
    out << line.str();
    out.flush();
    return out ? 0 : 1;
  } catch (const Error& e) {
    err << "h3 tool tokenize: error: " << e.what() << "\n";
    return 1;
  }
}

int tool_tokenize(int argc, char** argv) { return tool_tokenize(argc, argv, std::cin, std::cout, std::cerr); }

}  // namespace h3

#include "tools/tokenize_tool.h"

#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "text/tokenizer.h"
#include "tools/tool_args.h"
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

}  // namespace

int tool_tokenize(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err) {
  ToolArgs args;
  auto usage_error = parse_tool_args(argc, argv, {"--tokenizer", "--text"}, {"--tokenizer PATH"}, args, {"--stdin"});
  if (!usage_error && !args.help && args.has("--text") == args.has("--stdin"))
    usage_error = "give exactly one of --text TEXT and --stdin";
  if (const auto status = usage_exit_status("tokenize", kUsage, usage_error, args.help, out, err)) return *status;
  try {
    const Tokenizer tokenizer = Tokenizer::from_file(args.get("--tokenizer"));
    const std::string text = args.has("--stdin")
                                 ? std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())
                                 : args.get("--text");
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

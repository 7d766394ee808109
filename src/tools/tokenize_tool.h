// `h3 tool tokenize --tokenizer PATH [--text TEXT | --stdin]`: prints the ids as a JSON array on one line.
#pragma once
#include <iosfwd>

namespace h3 {

// argv[0] is the tool's own name and is skipped; the options follow. Returns the exit status: 0 on success,
// 1 when encoding fails (bad tokenizer file, text that is not UTF-8), 2 for bad usage (one line on stderr).
int tool_tokenize(int argc, char** argv);
// The same with explicit streams (for tests).
int tool_tokenize(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace h3

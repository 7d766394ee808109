// The interactive session (h3 -d DIR without -p): one resident engine — tokenizer, prompt conditioning cache,
// transformer, decoders — and many videos. A line is a prompt, or a !command (!help lists them). Videos are
// numbered in a session folder. Ctrl-C cancels a running generation (or clears the typed line); !quit or
// end of input (Ctrl-D) leaves.
#pragma once
#include "app/cli_options.h"
#include "app/line_reader.h"
#include "h3/h3.h"
#include "media/terminal_image.h"

namespace h3::app {

// Runs the session until !quit or end of input; returns the exit status. `interactive`: stdin is a terminal
// (prompt shown, line editing, Ctrl-C clears the line).
int run_session(Engine& engine, const CliOptions& options, LineReader& reader, bool interactive);

}  // namespace h3::app

// `h3 serve -d DIR [options]`: the command line of the HTTP server (server/http_server.h). It binds loopback unless
// told otherwise, prints "h3 serve: listening on http://HOST:PORT" on stdout once it accepts connections, and stops
// on SIGTERM or SIGINT: no new connection is taken, a generating job is queued again (a job writing its MP4
// finishes), and the exit status is 0.
#pragma once
#include <string>

#include "server/http_server.h"

namespace h3::server {

// argv holds what follows "serve". Throws h3::Error with one sentence for a bad option.
ServerOptions parse_serve_options(int argc, char** argv, bool* help);
std::string serve_help_text();

// Exit status: 0 after a stop on request, 1 a runtime failure, 2 a usage error.
int serve_main(int argc, char** argv);

}  // namespace h3::server

#include "server/serve_command.h"

#include <pthread.h>
#include <unistd.h>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "util/error.h"

namespace h3::server {

namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;
constexpr int64_t kMaxQueueLimit = 1'000'000;
constexpr int64_t kMaxBodyMiB = 16384;
constexpr int64_t kMaxTimeoutSeconds = 3600;

int64_t integer_option(const std::string& name, const std::string& text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    fail("--", name, " must be an integer between ", lo, " and ", hi, ", got \"", text, "\".");
  return v;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

std::string serve_help_text() {
  const ServerOptions d;
  return cat(
      "usage: h3 serve -d DIR [options]\n"
      "An HTTP server with OpenAI's video API (POST /v1/videos, GET /v1/videos[/{id}[/content|/preview]],\n"
      "DELETE /v1/videos/{id}, GET /healthz, GET /metrics); jobs are kept in the data folder and survive restarts.\n"
      "  -d, --model-dir DIR  the MiniMax-H3 snapshot\n"
      "  --device D           cpu | cuda | auto (default ", d.device, ")\n",
      "  --host H             the address to listen on (default ", d.host, ": this machine only)\n",
      "  --port N             0..65535, 0 for any free port (default ", d.port, ")\n",
      "  --api-key KEY        every request must send \"Authorization: Bearer KEY\"\n"
      "  --max-queue N        queued videos beyond which a submission is refused with 429, 1..", kMaxQueueLimit,
      " (default ", d.max_queue, ")\n",
      "  --data-dir DIR       the jobs' database and files (default ", d.data_dir, ")\n",
      "  --max-body-mb N      the largest request body in MiB, uploads included, 1..", kMaxBodyMiB, " (default ",
      d.max_body_bytes >> 20, ")\n",
      "  --timeout S          seconds a client may stay silent while sending or reading, 1..", kMaxTimeoutSeconds,
      " (default ", d.timeout_seconds, ")\n",
      "SIGTERM or SIGINT stops the server: a generating video is queued again for the next start.\n");
}

ServerOptions parse_serve_options(int argc, char** argv, bool* help) {
  ServerOptions o;
  *help = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return o;
    }
    if (arg == "-d") arg = "--model-dir";
    if (arg.rfind("--", 0) != 0) fail("h3 serve takes options only, got \"", arg, "\" (h3 serve --help lists them).");
    std::string name = arg.substr(2);
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else {
      if (i + 1 >= argc) fail("--", name, " needs a value (h3 serve --help lists the options).");
      value = argv[++i];
    }
    if (name == "model-dir") {
      o.model_dir = value;
    } else if (name == "device") {
      if (value != "cpu" && value != "cuda" && value != "auto")
        fail("--device must be cpu, cuda or auto, got \"", value, "\".");
      o.device = value;
    } else if (name == "host") {
      if (value.empty()) fail("--host must name an address, got an empty value.");
      o.host = value;
    } else if (name == "port") {
      o.port = static_cast<int>(integer_option(name, value, 0, 65535));
    } else if (name == "api-key") {
      if (value.empty()) fail("--api-key must not be empty.");
      o.api_key = value;
    } else if (name == "max-queue") {
      o.max_queue = integer_option(name, value, 1, kMaxQueueLimit);
    } else if (name == "data-dir") {
      if (value.empty()) fail("--data-dir must name a folder, got an empty value.");
      o.data_dir = value;
    } else if (name == "max-body-mb") {
      o.max_body_bytes = integer_option(name, value, 1, kMaxBodyMiB) << 20;
    } else if (name == "timeout") {
      o.timeout_seconds = static_cast<int>(integer_option(name, value, 1, kMaxTimeoutSeconds));
    } else {
      fail("h3 serve has no option --", name, " (h3 serve --help lists them).");
    }
  }
  if (o.model_dir.empty()) fail("h3 serve needs the model folder: h3 serve -d DIR.");
  return o;
}

int serve_main(int argc, char** argv) {
  ServerOptions options;
  try {
    bool help = false;
    options = parse_serve_options(argc, argv, &help);
    if (help) {
      std::fputs(serve_help_text().c_str(), stdout);
      return 0;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "h3: %s\n", e.what());
    return kExitUsage;
  }
  // SIGTERM and SIGINT are taken by one thread (sigwait), never by a handler: blocked here, before any thread
  // starts, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  try {
    if (options.api_key.empty() && !is_loopback(options.host))
      std::fprintf(stderr, "h3 serve: warning: listening on %s without --api-key: anyone who reaches it can use it.\n",
                   options.host.c_str());
    Server server(options);
    std::thread signals([&] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      std::fprintf(stderr, "h3 serve: %s: stopping (a generating video is queued again)\n", strsignal(sig));
      server.stop();
    });
    std::exception_ptr failure;
    try {
      std::printf("h3 serve: listening on http://%s:%d\n", options.host.c_str(), server.port());
      std::fflush(stdout);
      server.serve();
    } catch (...) {
      failure = std::current_exception();
      ::kill(::getpid(), SIGTERM);  // ends the signal thread's wait
    }
    signals.join();
    if (failure) std::rethrow_exception(failure);
    std::fprintf(stderr, "h3 serve: stopped\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h3 serve: %s\n", e.what());
    return kExitRuntime;
  }
}

}  // namespace h3::server

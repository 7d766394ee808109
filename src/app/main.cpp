// The h3 command line: a thin client of libh3.
//
//   h3 -d DIR -p PROMPT [options]   one video       h3 -d DIR --info   the snapshot and the device
//   h3 -d DIR [options]             a session       h3 tool NAME ...   developer tools
//   h3 serve -d DIR [options]       the HTTP server (server/serve_command.h)
//
// Exit status: 0 success, 1 runtime failure, 2 usage error (before any weight is loaded), 130 cancelled.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "app/cli_options.h"
#include "app/generation.h"
#include "app/interrupt.h"
#include "app/line_reader.h"
#include "app/outputs.h"
#include "app/session.h"
#include "h3/version.h"
#include "pipeline/request.h"
#include "server/serve_command.h"
#include "tools/inspect.h"
#include "tools/registry.h"
#include "util/log.h"

namespace h3::app {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCancelled = 130;  // 128 + SIGINT, as shells report it
constexpr const char* kDefaultOutputPrefix = "h3-";

EngineOptions engine_options(const CliOptions& o) {
  EngineOptions e;
  e.model_dir = o.model_dir;
  e.device = o.device;
  e.precision = o.precision;
  e.ssd_streaming = o.ssd_streaming;
  if (o.memory_budget_gb) e.memory_budget_bytes = gigabytes_to_bytes(*o.memory_budget_gb);
  e.gpus = o.gpus;
  return e;
}

nlohmann::json build_info_json() {
  const BuildInfo b = build_info();
  nlohmann::json j = {{"version", b.version}, {"commit", b.commit}, {"cuda", b.cuda}};
  if (b.cuda)
    j.update({{"cuda_architectures", b.cuda_architectures},
              {"cuda_runtime", b.cuda_runtime},
              {"cuda_driver", b.cuda_driver},
              {"cublaslt", b.cublaslt},
              {"cudnn", b.cudnn}});
  return j;
}

// What h3 is, then what the snapshot holds (--json: both as one JSON object on one line).
int run_info(const CliOptions& o) {
  if (o.model_dir.empty()) throw UsageError("--info needs the model folder: h3 --info -d DIR.");
  // --info reads the snapshot's headers and nothing else (--json: says it as JSON): an option it would ignore is
  // refused, not dropped.
  std::vector<std::string> ignored;
  for (const std::string& name : o.given)
    if (name != "info" && name != "model-dir" && name != "memory-budget" && name != "json" &&
        std::find(ignored.begin(), ignored.end(), name) == ignored.end())
      ignored.push_back(name);
  std::string list;
  for (const std::string& name : ignored) list += cat(list.empty() ? "" : ", ", "--", name);
  if (!ignored.empty())
    throw UsageError(cat("--info only reads the snapshot's headers (-d DIR) and would ignore ", list,
                         "; give ", ignored.size() == 1 ? "it" : "them", " without --info."));
  InspectReport r = inspect_snapshot(o.model_dir);
  // The residency plan the default request would run under (configs only: nothing loads), when the snapshot is sound.
  nlohmann::json plan;
  if (r.problems.empty()) {
    GenerationRequest defaults;
    defaults.prompt = "a";
    const std::unique_ptr<Engine> engine = Engine::open(engine_options(o));
    const ResolvedRequest resolved = engine->validate(defaults);
    plan = {{"backend", engine->backend_name()}, {"width", resolved.width}, {"height", resolved.height},
            {"frames", resolved.frames}, {"passes", resolved.steps}, {"plan", engine->residency_plan(defaults)}};
  }
  if (o.json) {
    nlohmann::json j = r.json;
    j["h3"] = build_info_json();
    if (!plan.is_null()) j["residency_plan"] = plan;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::fputs((build_info_text() + r.text).c_str(), stdout);
    if (!plan.is_null())
      std::printf("residency plan (%s backend, default %lldx%lldx%lld, %lld passes): %s\n",
                  plan["backend"].get<std::string>().c_str(), plan["width"].get<long long>(),
                  plan["height"].get<long long>(), plan["frames"].get<long long>(), plan["passes"].get<long long>(),
                  plan["plan"].get<std::string>().c_str());
  }
  return r.problems.empty() ? 0 : kExitRuntime;
}

// The request's ranges, checked against the model (configs only): a violation is a usage error.
void validate_or_usage_error(const Engine& engine, const GenerationRequest& r,
                             RequestCheck scope = RequestCheck::Whole) {
  try {
    engine.validate(r, scope);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// Where the one-shot run writes; every destination is checked before the model is opened, and kept apart from the
// model folder, the inputs and the other outputs.
OutputPlan plan_outputs(const CliOptions& o) {
  OutputPlan plan;
  if (!o.output)
    check_folder_destination("the default output folder", kDefaultOutputDir);
  else if (!o.output->empty())
    check_mp4_destination("-o", *o.output);
  if (!o.frames_dir.empty()) check_folder_destination("--frames-dir", o.frames_dir);
  if (!o.wav.empty()) check_file_destination("--wav", o.wav);
  check_outputs_apart(o.model_dir, request_input_files(o.request), {{"-o", o.output.value_or("")}, {"--wav", o.wav}},
                      {"--frames-dir", o.frames_dir});
  if (o.output && !o.output->empty()) check_mp4_name("-o", *o.output);
  if (o.output && o.output->empty() && o.frames_dir.empty() && o.wav.empty())
    throw UsageError("-o '' writes no MP4, and without --frames-dir DIR or --wav PATH the run would write nothing; "
                     "give an MP4 name or one of them.");
  if (o.output && !o.output->empty()) plan.mp4_path = *o.output;
  plan.frames_dir = o.frames_dir;
  plan.wav = o.wav;
  return plan;
}

DisplaySettings display_settings(const CliOptions& o) {
  DisplaySettings d;
  d.show = o.show;
  d.zoom = o.zoom;
  d.profile = o.profile;
  d.quiet = o.quiet;
  d.json = o.json;
  d.terminal = detect_terminal();
  if (o.show && d.terminal.protocol == TerminalProtocol::None && !o.quiet)
    std::fprintf(stderr, "h3: warning: --show shows nothing here: %s.\n", d.terminal.description.c_str());
  return d;
}

int run_one_shot(CliOptions& o) {
  OutputPlan plan = plan_outputs(o);
  if (o.quiet) set_log_level(LogLevel::Error);
  if (o.random_seed) o.request.seed = draw_random_seed();
  // From here a Ctrl-C cancels: the checks below, then the engine's inside every phase, then the writes'.
  install_interrupt_handler();
  set_generation_running(true);
  std::unique_ptr<Engine> engine = Engine::open(engine_options(o));
  validate_or_usage_error(*engine, o.request);
  if (interrupt_flag().load()) throw Cancelled();
  if (!o.output) plan.numbered = NumberedFiles(kDefaultOutputDir, kDefaultOutputPrefix, ".mp4");
  run_generation(*engine, o.request, plan, display_settings(o), &interrupt_flag());
  return 0;
}

int run_interactive(CliOptions& o) {
  for (const std::string& name : one_shot_only_options())
    if (o.was_given(name))
      throw UsageError(cat("--", name, " applies to a one-shot run (-p PROMPT); the session numbers its videos in ",
                           "its own folder (!output DIR changes it, !save PATH copies the last one)."));
  for (const std::string name : {"json", "quiet"})
    if (o.was_given(name))
      throw UsageError(cat("--", name, " applies to a one-shot run (-p PROMPT)", name == "json" ? " and to --info" : "",
                           "; the session talks on its terminal."));
  std::unique_ptr<Engine> engine = Engine::open(engine_options(o));
  validate_or_usage_error(*engine, o.request, RequestCheck::SettingsOnly);
  install_interrupt_handler();
  const bool interactive = ::isatty(STDIN_FILENO) == 1;
  std::unique_ptr<LineReader> reader =
      interactive ? make_editline_reader(default_history_path()) : make_plain_reader(STDIN_FILENO);
  return run_session(*engine, o, *reader, interactive);
}

int run(int argc, char** argv) {
  try {
    CliOptions o = parse_command_line(argc, argv);
    if (o.help) {
      std::fputs(help_text().c_str(), stdout);
      return 0;
    }
    if (o.version) {
      std::fputs(build_info_text().c_str(), stdout);
      return 0;
    }
    if (o.info) return run_info(o);
    if (o.model_dir.empty())
      throw UsageError("h3 needs the model folder: -d DIR (a MiniMax-H3 snapshot; h3 tool make-tiny-model DIR "
                       "writes a tiny one).");
    return o.prompt ? run_one_shot(o) : run_interactive(o);
  } catch (const UsageError& e) {
    print_error_lines(e.what());
    return kExitUsage;
  } catch (const Cancelled&) {
    print_error_lines("cancelled; nothing was written.");
    return kExitCancelled;
  } catch (const Error& e) {
    print_error_lines(e.what());
    return kExitRuntime;
  } catch (const std::exception& e) {
    print_error_lines(e.what());
    return kExitRuntime;
  }
}

}  // namespace
}  // namespace h3::app

int main(int argc, char** argv) {
  // A reader that leaves a FIFO or pipe h3 writes into (--wav /dev/stdout | head) makes the write fail with EPIPE,
  // reported as a sentence with exit status 1, instead of killing h3 with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && !std::strcmp(argv[1], "serve")) return h3::server::serve_main(argc - 2, argv + 2);
  if (argc >= 2 && !std::strcmp(argv[1], "tool")) {
    try {
      return h3::run_tool(argc - 2, argv + 2);
    } catch (const h3::Error& e) {
      std::fprintf(stderr, "h3: %s\n", e.what());
      return 1;
    } catch (const std::exception& e) {  // a library's own (filesystem, allocation): still one sentence, exit 1
      std::fprintf(stderr, "h3: %s\n", e.what());
      return 1;
    }
  }
  return h3::app::run(argc, argv);
}

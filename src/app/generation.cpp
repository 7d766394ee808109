#include "app/generation.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli_options.h"
#include "app/preview.h"
#include "app/progress.h"
#include "media/mp4_writer.h"
#include "media/ppm_writer.h"
#include "media/wav_writer.h"
#include "pipeline/geometry.h"
#include "pipeline/request.h"
#include "util/cancel.h"

namespace h3::app {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The soundtrack cut to the video's length, channel-planar, into `out`.
void write_soundtrack(OutputFile& out, const GenerationResult& r) {
  const int64_t total = r.audio.dim(1);
  const int64_t samples = std::min<int64_t>(
      total, audio_samples_for_frames(static_cast<int>(r.video.dim(1)), static_cast<int>(r.fps),
                                      static_cast<int>(r.sample_rate)));
  std::vector<float> planar(static_cast<size_t>(2 * samples));
  for (int64_t c = 0; c < 2; ++c)
    std::copy_n(r.audio.ptr<float>() + c * total, samples, planar.data() + c * samples);
  write_wav(out, planar.data(), 2, samples, static_cast<int>(r.sample_rate));
}

}  // namespace

std::string describe_request(const ResolvedRequest& r) {
  const GenerationRequest& q = r.request;
  std::string keyframes;
  for (const auto& [name, k] : {std::pair{"first", &q.first_frame}, std::pair{"last", &q.last_frame}})
    if (*k) keyframes += cat(keyframes.empty() ? "; keyframes: " : ", ", name, " ", (*k)->describe());
  const std::string controls = describe_speed_controls(r);
  return cat(r.width, "x", r.height, ", ", r.frames, " frames (", seconds_text(r.frames), " s at ", kFps,
             " fps), ", r.steps, " passes, seed ", q.seed, keyframes, controls.empty() ? "" : "; " + controls);
}

std::string result_json(const GenerationResult& r, const std::string& mp4, const OutputPlan& plan,
                        double write_seconds, double total_seconds) {
  using nlohmann::json;
  auto path_or_null = [](const std::string& p) { return p.empty() ? json() : json(p); };
  json timings = json::object();
  for (const PhaseTiming& t : r.timings) {
    std::string name = phase_name(t.phase);
    std::replace(name.begin(), name.end(), ' ', '_');
    timings[name] = timings.value(name, 0.0) + t.wall_seconds;
  }
  if (write_seconds > 0) timings["write"] = write_seconds;
  timings["total"] = total_seconds;
  const ResolvedRequest& q = r.request;
  return json{{"path", path_or_null(mp4)},
              {"frames_dir", path_or_null(plan.frames_dir)},
              {"wav", path_or_null(plan.wav)},
              {"seed", q.request.seed},
              {"workflow", workflow_name(q.workflow)},
              {"width", r.video.dim(3)},
              {"height", r.video.dim(2)},
              {"frames", r.video.dim(1)},
              {"passes", q.steps},
              {"prompt_tokens", r.prompt_tokens},
              {"prompt_cached", r.prompt_cache_hit},
              {"timings", timings}}
      .dump();
}

std::string run_generation(Engine& engine, const GenerationRequest& request, const OutputPlan& plan,
                         const DisplaySettings& display, const std::atomic<bool>* cancel) {
  const auto t0 = Clock::now();
  const ResolvedRequest resolved = engine.validate(request);
  if (!display.quiet) {
    std::fprintf(stderr, "h3: %s\n", describe_request(resolved).c_str());
    if (!resolved.frames_note.empty()) std::fprintf(stderr, "h3: %s\n", resolved.frames_note.c_str());
    if (const std::string w = few_passes_reuse_warning(resolved); !w.empty())
      std::fprintf(stderr, "h3: warning: %s\n", w.c_str());
  }

  ProgressDisplay progress(stderr, ::isatty(STDERR_FILENO) == 1, display.quiet);
  CpuClock cpu;
  const bool previews = display.show && display.terminal.protocol != TerminalProtocol::None;
  Previewer previewer(display.terminal, display.zoom);
  double preview_seconds = 0;

  GenerateCallbacks cb;
  cb.cancel = cancel;
  cb.on_progress = [&](const ProgressEvent& e) {
    cpu.on_event(e);
    progress.on_event(e);
  };
  if (previews)
    cb.on_pass = [&](const PassProgress& p) { preview_seconds += previewer.show_pass(engine, resolved, p, progress); };

  GenerationResult result;
  try {
    result = engine.generate(request, cb);
  } catch (...) {
    progress.clear_line();
    throw;
  }
  cpu.stop();

  // The outputs, staged (app/outputs.h): each is written under a temporary name and all are published together at
  // the end, so a failure or a cancel — checked between frames, inside the MP4 encode, and once more before the
  // renames — leaves nothing new on disk. A FIFO or a device (--wav only) is written straight into. A Ctrl-C after
  // the last check, while the complete files are renamed into place, is too late: the run completes.
  const CancelScope cancel_scope(cancel);
  const auto write_start = Clock::now();
  const double write_cpu_start = process_cpu_seconds();
  // A soundtrack written into standard output (--wav /dev/stdout) keeps it to itself: the report goes to stderr.
  std::FILE* report = !plan.wav.empty() && is_standard_output(plan.wav) ? stderr : stdout;
  std::vector<std::string> written;  // each 'wrote' line names the seed (the one drawn, with --seed random)
  const std::string seed = cat("seed ", request.seed);
  // The video in 8 bits, converted once for the frames, the MP4 and the final preview.
  std::optional<Rgb8Video> frames8;
  auto frames = [&]() -> const Rgb8Video& {
    if (!frames8) frames8 = rgb8_from_tensor(result.video);
    return *frames8;
  };
  StagedOutputs staged;
  std::string mp4_path;
  const bool mp4 = plan.mp4_path || plan.numbered;
  try {
    throw_if_cancelled();
    if (!plan.frames_dir.empty()) {
      progress.message(cat("writing ", result.video.dim(1), " frames to ", plan.frames_dir));
      staged.create_folders(plan.frames_dir);
      const Rgb8Video& v = frames();
      for (int f = 0; f < v.frames; ++f) {
        throw_if_cancelled();
        const std::vector<uint8_t> bytes = encode_ppm(v.frame(f), v.width, v.height);
        OutputFile& out = staged.file((std::filesystem::path(plan.frames_dir) / frame_file_name(f)).string());
        out.write(bytes.data(), bytes.size());
        out.finish();
      }
      written.push_back(cat(plan.frames_dir, "/ (", result.video.dim(1), " PPM frames, ", seed, ")"));
    }
    if (!plan.wav.empty()) {
      progress.message(cat("writing ", plan.wav));
      write_soundtrack(staged.file(plan.wav), result);
      written.push_back(cat(plan.wav, " (", result.sample_rate / 1000, " kHz stereo WAV, ", seed, ")"));
    }
    if (mp4) {
      progress.message("writing the MP4");
      OutputFile& out = plan.mp4_path ? staged.file(*plan.mp4_path) : staged.numbered_file(*plan.numbered);
      write_generation_mp4(out, frames(), result);
    }
    throw_if_cancelled();
    const std::string numbered = staged.publish();
    mp4_path = plan.mp4_path.value_or(numbered);
  } catch (...) {
    progress.clear_line();
    throw;
  }
  if (mp4)
    written.push_back(cat(mp4_path, " (", result.video.dim(3), "x", result.video.dim(2), ", ", result.video.dim(1),
                          " frames = ", seconds_text(result.video.dim(1)), " s, H.264 + AAC ",
                          result.sample_rate / 1000, " kHz stereo, ", seed, ")"));
  const WriteTiming write{written.empty() ? 0.0 : since(write_start), process_cpu_seconds() - write_cpu_start};
  progress.clear_line();
  const double seconds = since(t0);

  if (previews) previewer.show_final(frames());
  if (!display.quiet)
    std::fprintf(stderr, "h3: done: %s\n", phase_summary(result, write.wall_seconds, seconds).c_str());
  if (display.profile) {
    std::fputs(profile_table(result, cpu, preview_seconds, write, seconds).c_str(), stderr);
    if (const std::string ops = engine.op_profile_report(); !ops.empty())
      std::fprintf(stderr, "device time per op (H3_CUDA_PROFILE):\n%s", ops.c_str());
  }
  // With --json the report stream carries the JSON line alone; the 'wrote' lines go to stderr.
  if (!display.quiet)
    for (const std::string& w : written) std::fprintf(display.json ? stderr : report, "wrote %s\n", w.c_str());
  const std::string mp4_written = mp4 ? mp4_path : std::string();
  if (display.json)
    std::fprintf(report, "%s\n", result_json(result, mp4_written, plan, write.wall_seconds, seconds).c_str());
  std::fflush(report);
  return mp4_written;
}

}  // namespace h3::app

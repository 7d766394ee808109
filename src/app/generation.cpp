#include "app/generation.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "app/cli_options.h"
#include "app/preview.h"
#include "app/progress.h"
#include "media/mp4_writer.h"
#include "media/ppm_writer.h"
#include "media/wav_writer.h"
#include "pipeline/geometry.h"

namespace h3::app {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The soundtrack cut to the video's length, channel-planar.
void write_soundtrack(const std::string& path, const GenerationResult& r) {
  const int64_t total = r.audio.dim(1);
  const int64_t samples = std::min<int64_t>(
      total, audio_samples_for_frames(static_cast<int>(r.video.dim(1)), static_cast<int>(r.fps),
                                      static_cast<int>(r.sample_rate)));
  std::vector<float> planar(static_cast<size_t>(2 * samples));
  for (int64_t c = 0; c < 2; ++c)
    std::copy_n(r.audio.ptr<float>() + c * total, samples, planar.data() + c * samples);
  write_wav(path, planar.data(), 2, samples, static_cast<int>(r.sample_rate));
}

}  // namespace

std::string describe_request(const ResolvedRequest& r) {
  const GenerationRequest& q = r.request;
  std::string keyframes;
  for (const auto& [name, k] : {std::pair{"first", &q.first_frame}, std::pair{"last", &q.last_frame}})
    if (*k) keyframes += cat(keyframes.empty() ? "; keyframes: " : ", ", name, " ", (*k)->describe());
  return cat(r.width, "x", r.height, ", ", r.frames, " frames (", seconds_text(r.frames), " s at ", kFps,
             " fps), ", q.steps, " passes, seed ", q.seed, keyframes);
}

std::string run_generation(Engine& engine, const GenerationRequest& request, const OutputPlan& plan,
                         const DisplaySettings& display, const std::atomic<bool>* cancel) {
  const auto t0 = Clock::now();
  const ResolvedRequest resolved = engine.validate(request);
  std::fprintf(stderr, "h3: %s\n", describe_request(resolved).c_str());
  if (!resolved.frames_note.empty()) std::fprintf(stderr, "h3: %s\n", resolved.frames_note.c_str());

  ProgressDisplay progress(stderr, ::isatty(STDERR_FILENO) == 1);
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
    cb.on_pass = [&](const PassProgress& p) { preview_seconds += previewer.show_pass(engine, p, progress); };

  GenerationResult result;
  try {
    result = engine.generate(request, cb);
  } catch (...) {
    progress.clear_line();
    throw;
  }
  cpu.stop();
  // Ctrl-C during the last phase: the user asked for nothing, so write nothing.
  if (cancel && cancel->load()) throw Cancelled();

  // Outputs, each through OutputFile (util/output_file.h): a file is replaced whole or not at all, so a failure
  // leaves nothing half-written; a FIFO or a device (--wav only) is written straight into.
  const auto write_start = Clock::now();
  const double write_cpu_start = process_cpu_seconds();
  // A soundtrack written into standard output (--wav /dev/stdout) keeps it to itself: the report goes to stderr.
  std::FILE* report = !plan.wav.empty() && is_standard_output(plan.wav) ? stderr : stdout;
  std::string mp4;
  std::vector<std::string> written;
  // The video in 8 bits, converted once for the frames, the MP4 and the final preview.
  std::optional<Rgb8Video> frames8;
  auto frames = [&]() -> const Rgb8Video& {
    if (!frames8) frames8 = rgb8_from_tensor(result.video);
    return *frames8;
  };
  if (!plan.frames_dir.empty()) {
    progress.message(cat("writing ", result.video.dim(1), " frames to ", plan.frames_dir));
    write_frames_dir(plan.frames_dir, frames());
    written.push_back(cat(plan.frames_dir, "/ (", result.video.dim(1), " PPM frames)"));
  }
  if (!plan.wav.empty()) {
    progress.message(cat("writing ", plan.wav));
    write_soundtrack(plan.wav, result);
    written.push_back(cat(plan.wav, " (", result.sample_rate / 1000, " kHz stereo WAV)"));
  }
  if (plan.mp4_path || plan.numbered) {
    progress.message("writing the MP4");
    if (plan.mp4_path) {
      write_generation_mp4(*plan.mp4_path, frames(), result);
      mp4 = *plan.mp4_path;
    } else {
      mp4 = plan.numbered->publish([&](const std::string& temp) { write_generation_mp4(temp, frames(), result); });
    }
    written.push_back(cat(mp4, " (", result.video.dim(3), "x", result.video.dim(2), ", ", result.video.dim(1),
                          " frames = ", seconds_text(result.video.dim(1)), " s, H.264 + AAC ",
                          result.sample_rate / 1000, " kHz stereo)"));
  }
  const WriteTiming write{written.empty() ? 0.0 : since(write_start), process_cpu_seconds() - write_cpu_start};
  progress.clear_line();
  const double seconds = since(t0);

  if (previews) previewer.show_final(frames());
  std::fprintf(stderr, "h3: done: %s\n", phase_summary(result, write.wall_seconds, seconds).c_str());
  if (display.profile) {
    std::fputs(profile_table(result, cpu, preview_seconds, write, seconds).c_str(), stderr);
    if (const std::string ops = engine.op_profile_report(); !ops.empty())
      std::fprintf(stderr, "device time per op (H3_CUDA_PROFILE):\n%s", ops.c_str());
  }
  for (const std::string& w : written) std::fprintf(report, "wrote %s\n", w.c_str());
  if (written.empty()) std::fprintf(report, "nothing written (-o '' without --frames-dir or --wav)\n");
  std::fflush(report);
  return mp4;
}

}  // namespace h3::app

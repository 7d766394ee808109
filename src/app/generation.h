// One generation as the CLI runs it (one-shot and interactive alike): progress on stderr, --show previews, the
// outputs (MP4, PPM frames, WAV), the phase summary and --profile's table.
#pragma once
#include <atomic>
#include <optional>
#include <string>

#include "app/outputs.h"
#include "h3/h3.h"
#include "media/terminal_image.h"

namespace h3::app {

struct OutputPlan {
  std::optional<std::string> mp4_path;     // an explicit -o PATH
  std::optional<NumberedFiles> numbered;   // otherwise the next free numbered name (neither: no MP4)
  std::string frames_dir;                  // PPM frames, when not empty
  std::string wav;                         // WAV soundtrack, when not empty
};

struct DisplaySettings {
  bool show = false;       // previews (only when `terminal` has a protocol)
  int zoom = 1;
  bool profile = false;
  bool quiet = false;      // errors only (and what --json and --profile ask for)
  bool json = false;       // the result as one JSON line (result_json) on the report stream
  TerminalSupport terminal;
};

// The request must be valid (Engine::validate); its seed is final. Returns the MP4 written (empty when none). Throws
// h3::Cancelled when `cancel` was raised (nothing is written then), h3::Error on failure.
std::string run_generation(Engine& engine, const GenerationRequest& request, const OutputPlan& plan,
                         const DisplaySettings& display, const std::atomic<bool>* cancel);

// "864x480, 124 frames (5.17 s at 24 fps), 20 passes, seed 42"
std::string describe_request(const ResolvedRequest& r);

// --json's line: {"path": the MP4 or null, "frames_dir", "wav" (null when not asked), "seed", "workflow", "width",
// "height", "frames", "passes", "prompt_tokens", "prompt_cached", "timings": {"load": s, ..., "write": s,
// "total": s}} — a timing per phase that ran, phase names with '_' for spaces ("video_decode").
std::string result_json(const GenerationResult& r, const std::string& mp4, const OutputPlan& plan,
                        double write_seconds, double total_seconds);

}  // namespace h3::app

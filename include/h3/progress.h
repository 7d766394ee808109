// What a generation reports while it runs: its phases, their progress and timings, and every denoising pass's clean
// estimate.
#pragma once
#include <cstdint>

#include "h3/tensor.h"

namespace h3 {

// ReadReferences and EncodeReferences run for ref2va only, EncodeKeyframes for fl2va only.
enum class Phase { Load, ReadReferences, EncodePrompt, EncodeKeyframes, EncodeReferences, Denoise, DecodeVideo, DecodeAudio };
const char* phase_name(Phase p);

struct ProgressEvent {
  Phase phase;
  // Units of the phase: passes for Denoise, frames for DecodeVideo, else 0/1. Every phase begins with done = 0 and
  // its total; Load is announced only when something is loaded.
  int64_t done = 0, total = 0;
};

struct PhaseTiming {
  Phase phase;
  double wall_seconds = 0;
  uint64_t peak_device_bytes = 0;  // most device memory held during the phase; 0 where the backend does not tell
  double device_seconds = 0;       // device time between the phase's start and end marks (the host clock on the CPU)
};

struct LatentGeometry;  // internal (pipeline/geometry.h)

// Reported after every denoising pass.
struct PassProgress {
  int64_t pass = 0;    // 0-based index of the pass just completed
  int64_t passes = 0;  // total passes of the request
  bool evaluated = true;  // false: a pass --reuse skipped (it stepped with an extrapolated velocity)
  const LatentGeometry* geometry = nullptr;
  // The clean estimate x0 = x + σ_t·v of the generated rows at this pass (host F32, rows as in the layout), e.g. for
  // previews; video_latents() unpatchifies it to (1, C, F, Hl, Wl).
  Tensor video_x0, audio_x0;
  Tensor video_latents() const;
};

}  // namespace h3

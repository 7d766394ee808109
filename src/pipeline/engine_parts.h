// An Engine over components built in memory instead of read from a snapshot (Engine::from_parts): benchmarks with
// random weights at the released sizes, tests with tiny models. Internal (the public API is include/h3/h3.h).
#pragma once
#include <memory>

#include "backend/backend.h"
#include "h3/h3.h"
#include "io/config.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "models/dit/dit.h"
#include "models/qwen3vl/text_model.h"
#include "models/video_vae/decoder.h"
#include "pipeline/schedule.h"
#include "text/tokenizer.h"

namespace h3 {

struct EngineParts {
  EngineOptions options;  // model_dir and device are not used
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Tokenizer> tokenizer;
  // Built on `backend`, which they reference: destroyed before it.
  std::unique_ptr<QwenTextModel> text;
  std::unique_ptr<Dit> dit;
  std::unique_ptr<VideoVaeDecoder> vae;
  std::unique_ptr<AudioVaeDecoder> audio;
  SchedulerConfig video_shift{kDefaultVideoShift}, audio_shift{kDefaultAudioShift};
};

}  // namespace h3

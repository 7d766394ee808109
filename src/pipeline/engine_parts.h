// An Engine over components built in memory instead of read from a snapshot (Engine::from_parts): benchmarks with
// random weights at the released sizes, tests with tiny models. Internal (the public API is include/h3/h3.h).
#pragma once
#include <functional>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "h3/h3.h"
#include "io/config.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "models/audio_vae/audio_vae_encoder.h"
#include "models/dit/dit.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/vision_model.h"
#include "models/video_vae/decoder.h"
#include "models/video_vae/encoder.h"
#include "pipeline/schedule.h"
#include "text/tokenizer.h"

namespace h3 {

// The four components' configurations (the text encoder's includes its vision tower), and the image processor's.
struct ComponentConfigs {
  DitConfig dit;
  TextEncoderConfig text;
  VideoVaeConfig vae;
  AudioVaeConfig audio;
  ImageProcessorConfig image_processor;
};
struct EngineParts {
  EngineOptions options;  // model_dir and device are not used
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Tokenizer> tokenizer;
  // Built on `backend`, which they reference: destroyed before it.
  std::unique_ptr<QwenTextModel> text;
  std::unique_ptr<Dit> dit;
  std::unique_ptr<VideoVaeDecoder> vae;
  std::unique_ptr<AudioVaeDecoder> audio;
  // fl2va only (an engine without them serves t2va): the vision tower, the video VAE encoder, the image processor.
  std::unique_ptr<QwenVisionModel> vision;
  std::unique_ptr<VideoVaeEncoder> vae_encoder;
  std::optional<ImageProcessorConfig> image_processor;
  // ref2va also (with the fl2va parts): its transformer, the audio VAE encoder, the video processor settings.
  std::unique_ptr<Dit> dit_ref;
  std::unique_ptr<AudioVaeEncoder> audio_encoder;
  std::optional<VideoProcessorConfig> video_processor;
  CanvasConfig canvas;
  SchedulerConfig video_shift{kDefaultVideoShift}, audio_shift{kDefaultAudioShift};
  // Makers of t2va's components (random_engine_parts sets them): the engine makes a component absent above when it
  // first needs it, and makes it again after its residency plan (pipeline/residency_plan.h) released it between
  // phases — the same weights: random ones from the same seed. The transformer's maker takes the plan's block
  // streaming. An engine lacking a maker for a part its workflow uses keeps every component resident (the resident
  // plan only, refused when it does not fit).
  struct Makers {
    std::function<std::unique_ptr<QwenTextModel>(const std::optional<BlockStreaming>&)> text;
    std::function<std::unique_ptr<Dit>(const std::optional<BlockStreaming>&)> dit;
    std::function<std::unique_ptr<VideoVaeDecoder>()> vae;
    std::function<std::unique_ptr<AudioVaeDecoder>()> audio;
    bool complete() const { return text && dit && vae && audio; }
  } makers;
  // The components' configurations, for an engine whose parts above are not made yet.
  std::optional<ComponentConfigs> configs;
};

// The released configurations (the io/config.h defaults) with identity latent normalizations, and the release's
// image processor (spec/layout.md §2.4: patch 16, temporal patch 2, merge 2, pixels in [65536, 16777216], mean and
// std 0.5 — io/config.h's defaults are transformers' class defaults, not these).
ComponentConfigs released_component_configs();
// Tiny configurations of the same architecture whose parts fit each other (a conditioner of `vocab` tokens, a
// vision tower of 2 blocks, a narrow video VAE encoder), with the release's image processor.
ComponentConfigs tiny_component_configs(int64_t vocab);

// Which components random_engine_parts builds: t2va's four, or also fl2va's keyframe parts (the vision tower, the
// video VAE encoder and the image processor settings).
enum class KeyframeParts { Without, With };
// Which transformer random_engine_parts builds: the base checkpoint's, or FastVideo's FastH3 student's (a random
// to_gate_compress in every main block, models/dit/dit_fasth3.h: the engine then runs the student's plan); its
// blocks' products in bf16, or in FP8 quantized from the same random bf16 weights (resolve_dit_precision's).
struct RandomTransformer {
  bool student_gates = false;
  DitPrecision precision{};
};

// Every component of `configs` with random weights made on `backend` (models/random_weights.h; component k drawn
// from seed + k, the DiT's AdaLN projections not resident), and `tokenizer`. `dit_bytes` (optional) receives the
// DiT's resident bytes. With the keyframe parts, the conditioner's vision token ids (image and video pads, vision
// start and end) are the ones `tokenizer` gives those added tokens, since the presentation takes them from it.
// t2va's components of random_engine_parts (the same weights for a seed) with only their makers: nothing is made
// before the engine's residency plan asks for it, so an engine under a device budget holds only what its plan does.
EngineParts lazy_random_engine_parts(std::unique_ptr<Backend> backend, std::unique_ptr<Tokenizer> tokenizer,
                                     const ComponentConfigs& configs, uint64_t seed);

EngineParts random_engine_parts(std::unique_ptr<Backend> backend, std::unique_ptr<Tokenizer> tokenizer,
                                const ComponentConfigs& configs, uint64_t seed, uint64_t* dit_bytes = nullptr,
                                KeyframeParts keyframe_parts = KeyframeParts::Without,
                                const RandomTransformer& transformer = {});

}  // namespace h3

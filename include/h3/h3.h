// libh3: MiniMax-H3 text(+media) → video with a synchronized soundtrack.
//
// Load a snapshot once, generate many:
//
//   auto engine = h3::Engine::open({.model_dir = "MiniMax-H3"});
//   h3::GenerationRequest req;  req.prompt = "A red fox walks through fresh snow.";
//   h3::GenerationResult out = engine->generate(req);          // out.video [3,F,H,W], out.audio [2,S]
//   h3::write_generation_mp4("fox.mp4", out);
//
// Requests are validated in full before any expensive work (h3::Error carries one sentence per violated rule).
// Components load on first use and stay resident; the prompt conditioning is cached per prompt, so a second
// generation with another seed skips loading and prompt encoding. The same from C: h3/h3_c.h.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "h3/error.h"
#include "h3/media.h"
#include "h3/progress.h"
#include "h3/request.h"
#include "h3/tensor.h"
#include "h3/version.h"

namespace h3 {

struct EngineOptions {
  std::string model_dir;
  std::string device = "auto";      // cpu | cuda | auto (CUDA when available)
  bool keep_adaln_weights = false;  // keep the DiT's AdaLN projections resident (faster when the schedule changes)
  // bf16 | fp8: the transformer blocks' products in bf16 (the exact path) or FP8 E4M3 (CUDA, compute capability
  // 8.9+; H3_FP8_WEIGHT_SCALING=channel|block picks the weight scales, channel by default). Checked by open().
  std::string precision = "bf16";
  int64_t vae_tile = 256;           // video VAE decode: minimum tile size in pixels (the reference's default)
  int64_t vae_tile_overlap = 64;    // and minimum tile overlap in pixels
  size_t prompt_cache_entries = 16;
  // At most this much device memory, in bytes (--memory-budget; absent: H3_DEVICE_MEMORY_LIMIT if set, else the
  // device's free memory): no allocation passes it, and the residency plan is chosen to fit it.
  std::optional<uint64_t> memory_budget_bytes = std::nullopt;
  // --ssd-streaming: the transformer's blocks stream from the checkpoint file every pass (the residency plan
  // "streamed from disk") whatever fits.
  bool ssd_streaming = false;
  // --gpus N / --devices LIST (issue 21): the CUDA devices the transformer runs on, one sequence-parallel rank each.
  // Empty or one: the one device `device` chooses. Checked by open() (the degree must divide the transformer's
  // attention heads, the devices must exist, NCCL be in the build).
  std::vector<int> gpus = {};
};

// Whether this build of the engine generates `w` (what a snapshot holds for it: h3 --info).
bool workflow_served(Workflow w);

struct GenerateCallbacks {
  std::function<void(const ProgressEvent&)> on_progress;
  std::function<void(const PassProgress&)> on_pass;  // after every denoising pass (its clean estimate x0)
  // After the denoise phase: the final normalized latents, video (1, C, F, Hl, Wl) on the canvas the model ran on
  // and audio (2, Ca, A). Returning false ends the generation there: generate() returns its result (timings
  // included) without decoding, its video and audio empty (e.g. a benchmark of the denoise alone).
  std::function<bool(const Tensor& video_latents, const Tensor& audio_latents)> on_latents;
  // Decoded frames as temporal chunks finish, on the output canvas (a render canvas' frames already upscaled):
  // [3, n, H, W] float32 in [0, 1], frames [first, first + n).
  std::function<void(const Tensor& frames, int64_t first_frame)> on_frames;
  // Checked inside every phase, between the models' units of work (a transformer block, a conditioner layer, a VAE
  // tile batch or block, a weight tensor while loading: util/cancel.h), and between phases; generate() then throws
  // h3::Cancelled. Components loaded before the cancel stay loaded; nothing else of the request is kept.
  const std::atomic<bool>* cancel = nullptr;
};

struct EngineParts;  // internal (pipeline/engine_parts.h, not installed): Engine::from_parts is for h3's own tests

// Parity testing: noise supplied instead of drawn from the seed (the reference's `latents` / `audio_latents`
// inputs), normalized latent space; every tensor may be empty (then it is drawn). A supplied tensor consumes nothing
// from the seed's stream (spec/sampling.md §5).
struct InjectedNoise {
  Tensor video;                    // (1, C, F, Hl, Wl)
  Tensor audio;                    // (2, Ca, A)
  std::vector<Tensor> conditions;  // per visual condition, packed order: its augmentation noise (its latent's shape)
  std::vector<Tensor> encodes;     // per visual condition, packed order: the standard-normal draw of its posterior
                                   // sample (its latent's shape; the engine's own draw is its seed-42 stream)
};

struct GenerationResult {
  ResolvedRequest request;
  Tensor video;  // [3, frames, H, W] float32 in [0, 1]
  Tensor audio;  // [2, samples] float32 in [-1, 1], untrimmed (hop · audio latents per channel)
  int64_t fps = 24;
  int64_t sample_rate = 32000;
  int64_t prompt_tokens = 0;
  bool prompt_cache_hit = false;
  std::vector<PhaseTiming> timings;
  // The residency plan the generation ran under (issue 17) and what its streaming moved.
  struct Residency {
    std::string plan;              // "resident", "phase-resident", "streamed from pinned host memory", ...
    std::string description;       // one line: the plan, its rings, its peak and the budget
    uint64_t budget_bytes = 0;     // 0: no budget (a backend that does not report its memory)
    uint64_t planned_peak_bytes = 0;
    uint64_t copied_bytes = 0;     // host -> device bytes of streamed blocks in the denoise (0: nothing streamed)
    double copy_seconds = 0;       // their copy time, and the part of it the compute waited for
    double stall_seconds = 0;
    int64_t passes = 0;            // model evaluations of the denoise (copied bytes / passes: per pass)
  } residency;
};

struct PromptCacheEntry {
  std::string prompt;
  int64_t tokens = 0;     // conditioning rows
  int64_t keyframes = 0;  // the keyframes it was conditioned on (the cache key covers their pixels)
  int64_t references = 0; // the references it was conditioned on (the cache key covers their normalized media)
};

struct EngineStats {
  int64_t component_loads = 0;  // components loaded from disk (each at most once per engine)
  int64_t prompt_encodes = 0;   // conditioner runs
  int64_t prompt_cache_hits = 0;
  int64_t generations = 0;
};

class Engine {
 public:
  // Finds the snapshot's components and reads their configs (headers only, no weights); fails when the snapshot
  // cannot serve t2va.
  static std::unique_ptr<Engine> open(const EngineOptions& options);
  // An engine over components already built (pipeline/engine_parts.h: random-weight benchmarks, tests); every
  // component must be present.
  static std::unique_ptr<Engine> from_parts(EngineParts&& parts);
  ~Engine();

  // Throws h3::Error listing every violated rule; cheap (no weights: the first check of a prompt reads the tokenizer,
  // whose control tokens the prompt must not contain). RequestCheck::SettingsOnly checks everything but the prompt
  // (a session's settings before it has one).
  ResolvedRequest validate(const GenerationRequest& request, RequestCheck scope = RequestCheck::Whole) const;
  GenerationResult generate(const GenerationRequest& request, const GenerateCallbacks& callbacks = {},
                            const InjectedNoise& noise = {});

  // Loads every component t2va needs now (otherwise each loads on first use).
  void load();
  // One representative frame of normalized video latents (1, C, F, Hl, Wl): the middle of the temporal chunk that
  // holds the middle frame, decoded alone (for previews). [3, 1, H, W] float32 in [0, 1]; upscaled to width × height
  // as the video is (a render canvas' latents) when both are given and differ from the decoded size.
  Tensor preview_frame(const Tensor& latents, int64_t width = 0, int64_t height = 0);

  std::string device_description() const;
  std::string backend_name() const;
  // !precision: bf16 or fp8, checked as open() checks EngineOptions::precision; a change frees the loaded
  // transformers (the next request loads them again in the new precision).
  void set_precision(const std::string& precision);
  const std::string& precision() const;
  EngineStats stats() const;
  size_t prompt_cache_size() const;
  std::vector<PromptCacheEntry> prompt_cache_entries() const;  // most recently used first
  void clear_prompt_cache();
  // Image pixels per latent pixel × transformer patch: width and height must be multiples of it.
  int64_t canvas_multiple() const;
  // The device memory a request needs with every component resident, by component and phase (text: one line per
  // part); generate() refuses a request whose plan exceeds what the device has available.
  std::string memory_plan(const GenerationRequest& request) const;
  // The residency plan generate() would choose for `request` now (one line, pipeline/residency_plan.h), or the
  // sentence it would refuse the request with; "resident (no budget)" on a backend that does not report its memory.
  std::string residency_plan(const GenerationRequest& request) const;
  // The device time of every backend op since the previous call, as a table, where the backend records it (the
  // CUDA backend made with H3_CUDA_PROFILE=1 in the environment); empty otherwise.
  std::string op_profile_report();

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// MP4 (H.264 + AAC, audio trimmed to the video's length) from a result, written atomically.
void write_generation_mp4(const std::string& path, const GenerationResult& result);
// The same from the result's video already converted to 8 bits, for a caller that needs those frames for other
// outputs too.
void write_generation_mp4(const std::string& path, const Rgb8Video& frames, const GenerationResult& result);
// The same into a staged file (util/output_file.h), finished but not committed: the caller publishes it.
class OutputFile;
void write_generation_mp4(OutputFile& out, const Rgb8Video& frames, const GenerationResult& result);

}  // namespace h3

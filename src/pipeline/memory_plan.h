// Device memory plan of a generation with every component resident (DESIGN: one process, load once, generate many):
// the weights of the transformer (after its AdaLN tables: the AdaLN projections stream unless kept), the
// conditioner's layers 0..49 (its embedding table stays on the host), both VAE decoders — for fl2va also the vision
// tower and the video VAE encoder — and the largest working set of any phase for the request's canvas. Engine::generate checks it before loading anything and refuses a request
// that cannot fit with one sentence naming the remedy.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/config.h"
#include "models/video_vae/decoder.h"
#include "models/video_vae/encoder.h"
#include "pipeline/geometry.h"
#include "tensor/dtype.h"

namespace h3 {

// One ref2va reference as the plan sees it from its file's header: the canvas it is encoded at, the 24 fps frames it
// contributes (at most the request's), the samples of its sound at the audio VAE's rate.
struct ReferenceFootprint {
  enum class Kind { Image, Video, Audio };
  Kind kind = Kind::Image;
  int64_t width = 0, height = 0;  // image and video
  int64_t frames = 1;             // video: the frames the conditioner reads
  int64_t encode_frames = 1;      // video: the frames the VAE encodes (snapped down to whole clips)
  int64_t audio_samples = 0;      // audio, and a video's soundtrack (0: none)
};

// Prompt rows the plan assumes (the real count is known only after tokenizing; rows are cheap next to the video's).
constexpr int64_t kPlannedPromptTokens = 512;

constexpr uint64_t kDeviceOverheadBytes = uint64_t(512) << 20;

struct MemoryPlanInputs {
  DitConfig dit;
  TextEncoderConfig text;
  VideoVaeConfig vae;
  AudioVaeConfig audio;
  DType activation_dtype = DType::BF16;  // the backend's
  DType vae_gemm_dtype = DType::F16;     // video_vae_gemm_dtype(backend)
  bool keep_adaln_weights = false;
  std::optional<int64_t> dit_layers;  // the transformer blocks the request runs (--layers; absent: all)
  TileOptions tiles;
  LatentGeometry geometry;  // of the request
  int64_t passes = 2;       // model passes (sizes the AdaLN tables)
  int64_t prompt_tokens = kPlannedPromptTokens;
  // fl2va: how many keyframes (each placed on the request's canvas), the image processor that sizes their vision
  // grids, and the encoder's tiles. 0 keyframes: t2va (no vision tower, no encoder).
  int64_t keyframes = 0;
  ImageProcessorConfig image_processor;
  EncodeTileOptions encode_tiles;
  // ref2va: its references (non-empty selects ref2va's parts: the vision tower, both encoders and its own
  // transformer in place of the t2va/fl2va one) and the video processor that sizes the videos' vision grids.
  std::vector<ReferenceFootprint> references;
  VideoProcessorConfig video_processor;
  // Added to every phase's working memory: allocator rounding, library workspaces (cuBLASLt, cuDNN) and
  // fragmentation beyond the counted tensors (kDeviceOverheadBytes on a GPU; a backend whose device tensors are
  // exactly the counted ones, the CPU backend under a budget, has none).
  uint64_t overhead_bytes = kDeviceOverheadBytes;
};

// The components a memory plan counts: a weight part is one of them, a phase computes with some of them (what a
// residency plan keeps resident during that phase, pipeline/residency_plan.h).
enum class PlanComponent {
  None,
  Transformer,
  TextEncoder,
  VisionTower,
  VideoEncoder,
  AudioEncoder,
  VideoDecoder,
  AudioDecoder
};

struct MemoryPlan {
  struct Part {
    std::string what;
    uint64_t bytes = 0;
    PlanComponent component = PlanComponent::None;  // weights: the component
    std::vector<PlanComponent> uses;                 // phases: the components it computes with
  };
  std::vector<Part> weights;  // one per component
  std::vector<Part> phases;   // working memory of each phase beyond the weights
  uint64_t weight_bytes = 0;
  uint64_t working_bytes = 0;  // the largest phase
  std::string peak_phase;
  uint64_t peak_bytes() const { return weight_bytes + working_bytes; }
};

MemoryPlan plan_generation_memory(const MemoryPlanInputs& in);

// Bytes the transformer's weights occupy on a backend of activation dtype `act` (F32 modules in f32) with `blocks` of
// its blocks resident (absent: all; every block's AdaLN bias stays either way).
uint64_t dit_resident_bytes(const DitConfig& c, DType act, bool keep_adaln_weights,
                            std::optional<int64_t> blocks = std::nullopt);
// Working memory of one transformer pass over `rows` packed rows, with `timesteps` AdaLN table rows per modality.
uint64_t dit_step_workspace_bytes(const DitConfig& c, DType act, int64_t rows, int64_t timesteps);

// Throws h3::Error when `plan` does not fit: `available` is what this process can still use on the device (free
// memory plus what it already holds, weights included); `canvas` names the request (e.g. "1344x768x124").
void check_memory_plan(const MemoryPlan& plan, uint64_t available, const std::string& device, const std::string& canvas);

// Whether a resident part the request does not use (the other workflow's transformer, `held_bytes`) must be released
// before the request: when it and the request's plan together pass what this process can use (`available`, as for
// check_memory_plan). Unknown device memory (`available` 0) keeps it.
bool must_release_for(const MemoryPlan& plan, uint64_t held_bytes, uint64_t available);

// "12.3 GB"
std::string format_gb(uint64_t bytes);

}  // namespace h3

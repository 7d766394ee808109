// One generation request and its validation. validate_request() runs before any expensive work and checks every
// limit at once; each violation is one sentence naming the rule and the valid range.
//
// A request is workflow-neutral: the workflow follows from what it carries (spec/layout.md §4) — references select
// ref2va, keyframes fl2va, neither t2va.
//
// Our limits (the engine's, not the reference pipeline's — see the notes in request.cpp):
//   width, height  multiples of 32, ≥ 32, width·height ≤ 768·1344; t2va default 864 × 480
//   frames         rounded UP to 17·n + 5 (24 fps); the rounded count must lie in 5..362 (--frames 1..362)
//   seconds        alternative to frames (mutually exclusive): frames = round(seconds · 24), then as above
//   steps          model passes, 2..1000 (the reference's num_inference_steps = steps + 1 grid points); absent:
//                  the checkpoint's (kDefaultSteps; a FastH3 student's grid, models/dit/dit_fasth3.h)
//   reuse          1..3 (pipeline/reuse.h); render canvas: both sides or neither, multiples of 32, at most the output
//                  canvas, its aspect ratio (h3.c's rules)
//   seed           any uint64
//   keyframes      a first and/or a last keyframe (fl2va), never together with references
//   references     ≤ 9 images, ≤ 3 videos, ≤ 3 audio files, ≤ 12 in all; audio only beside a picture or a video;
//                  with reference sound (an audio file or a video's soundtrack) at least 56 frames
//   layers         DiT blocks to run, seven tenths of the transformer's (rounded up) to all of them (35..50)
//   core_reuse     1..6, not together with reuse > 1
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "h3/media.h"

namespace h3 {

enum class Workflow { T2VA, FL2VA, Ref2VA };
const char* workflow_name(Workflow w);  // "t2va", "fl2va", "ref2va"

constexpr int64_t kDefaultWidth = 864;
constexpr int64_t kDefaultHeight = 480;
constexpr int64_t kDefaultFrames = 124;  // 5.167 s
constexpr int64_t kDefaultSteps = 20;    // model passes of a checkpoint without a grid of its own
constexpr uint64_t kDefaultSeed = 42;

constexpr int64_t kCanvasMultiple = 32;            // VAE ÷16 × transformer patch 2
constexpr int64_t kMaxCanvasArea = 768 * 1344;     // the released canvas' area
constexpr int64_t kMinFrames = 5;                  // 17·0 + 5
constexpr int64_t kMaxFrames = 362;                // 17·21 + 5 (15.08 s)
constexpr int64_t kMinSteps = 2;
constexpr int64_t kMaxSteps = 1000;
constexpr int64_t kMaxCoreReuse = 6;
// FastH3 (models/dit/dit_fasth3.h): the main blocks' attention a request asks for. Absent: the checkpoint's (VSA-H3
// with gates for a FastH3 student, dense otherwise); sparse on a checkpoint without gates: pure VSA-H3.
enum class AttentionChoice { Dense, Sparse };
const char* attention_choice_name(AttentionChoice a);  // h3.c's: above it validation lost subject fidelity
constexpr int64_t kMinReuse = 1;  // --reuse (pipeline/reuse.h)
constexpr int64_t kMaxReuse = 3;
constexpr int64_t kFewPassesForReuse = 8;  // below it, reuse leaves too few fresh evaluations (h3.c warns at 2..7)
constexpr int64_t kReleaseTransformerBlocks = 50;  // the release's DiT blocks (--layers' range by default)

// A picture given to a request: a file (read when the request runs; its header is checked before any model loads)
// or RGB pixels already in memory.
struct ImageInput {
  std::string path;                          // a file, or empty when `pixels` holds the picture
  std::shared_ptr<const Rgb8Image> pixels;   // an in-memory picture, or null when `path` names a file

  static ImageInput file(std::string path);
  static ImageInput rgb8(Rgb8Image image);
  bool is_file() const { return !pixels; }
  // The path, or "an RGB8 picture of W×H pixels" (for messages).
  std::string describe() const;
};

// One reference of a ref2va request, in the order the model reads them: a file, or media already in memory (as the
// reference's MiniMaxH3ImageReference / VideoReference / AudioReference dataclasses hold it, with their rates).
struct ReferenceInput {
  enum class Kind { Image, Video, Audio };
  // A video reference's soundtrack: its own, none, or another file's (or, in memory, `audio`).
  enum class Soundtrack { Own, None, Replaced };
  Kind kind = Kind::Image;
  std::string path;                         // the file, or empty for in-memory media
  Soundtrack soundtrack = Soundtrack::Own;  // videos only
  std::string soundtrack_path;              // Soundtrack::Replaced of a file video only
  // In-memory media (then `path` is empty): an image's pixels, a video's frames with the rate they carry, and a
  // waveform with its rate — an audio reference's, or an in-memory video's soundtrack (absent: a silent video).
  std::shared_ptr<const Rgb8Image> image;
  std::shared_ptr<const DecodedVideo> video;
  std::shared_ptr<const Waveform> audio;

  bool in_memory() const { return image || video || audio; }
  // The file, or "an in-memory picture of W×H pixels" and the like (for messages).
  std::string describe() const;
};

// ref2va's limits (the reference's MiniMaxH3Ref2VASetupStep and h3.c's): references of each kind and in all.
constexpr int64_t kMaxImageReferences = 9;
constexpr int64_t kMaxVideoReferences = 3;
constexpr int64_t kMaxAudioReferences = 3;
constexpr int64_t kMaxReferences = 12;
// A reference soundtrack is cut to the generated duration and must keep at least 2 s of it: 56 frames (17·3 + 5,
// 2.33 s) is the shortest aligned generation that does.
constexpr int64_t kMinFramesWithReferenceAudio = 56;

// How an image reference is sized before encoding: the reference's own rule (short edge at the snapshot's
// reference_image_short_edge, upscaling included: `Max`, the default) or h3.c's (down only, area-capped: `Match`).
enum class ReferenceImageSize { Max, Match };
const char* reference_image_size_name(ReferenceImageSize s);

struct GenerationRequest {
  std::string prompt;
  std::optional<ImageInput> first_frame, last_frame;  // fl2va keyframes
  std::vector<ReferenceInput> references;             // ref2va, in order
  ReferenceImageSize reference_image_size = ReferenceImageSize::Max;
  // Absent: t2va uses kDefaultWidth × kDefaultHeight; fl2va the canvas its geometry anchor resolves to.
  std::optional<int64_t> width, height;
  std::optional<int64_t> frames;   // --frames
  std::optional<double> seconds;   // --seconds (mutually exclusive with frames)
  std::optional<int64_t> steps;    // model passes (absent: the checkpoint's, ResolvedRequest::steps)
  uint64_t seed = kDefaultSeed;
  // Speed controls (issue 16, h3.c's; the defaults are the exact path). The DiT's: models/dit/dit.h
  // DitRequestOptions says what each does.
  std::optional<int64_t> layers;  // --layers: transformer blocks to run (absent: all)
  int64_t core_reuse = 1;         // --core-reuse: the core's refresh interval
  bool token_reduction = false;   // --token-reduction
  std::optional<AttentionChoice> attention;  // --attention dense|sparse
  std::optional<double> sparsity;            // --sparsity: the fraction of video key tiles skipped, [0, 1)
  // The pipeline's: the sampler's reuse (pipeline/reuse.h), the render canvas, the 256² RoPE rule.
  int64_t reuse = 1;  // --reuse: evaluate the first, the last and every reuse-th pass, extrapolate the others (1..3)
  std::optional<int64_t> render_width, render_height;  // --render-*: the model and VAEs run smaller, then upscale
  bool use_reference_rope = false;  // --use-reference-rope: the released spatial RoPE at 256 × 256 too

  // What the request carries decides its workflow: references → ref2va, keyframes → fl2va, else t2va.
  Workflow workflow() const;
  bool has_keyframes() const { return first_frame.has_value() || last_frame.has_value(); }
};

// A request that passed validation, with its derived quantities.
struct ResolvedRequest {
  GenerationRequest request;
  Workflow workflow = Workflow::T2VA;
  int64_t width = 0, height = 0;  // the canvas the request generates on (Engine::validate resolves a keyframe's)
  int64_t requested_frames = 0;   // before rounding (from --frames, --seconds or the default)
  int64_t frames = 0;             // 17·n + 5
  std::string frames_note;        // what the rounding did, empty when nothing was rounded
  int64_t steps = 0;              // model passes: request.steps, or the checkpoint's default
  int64_t grid_points() const { return steps + 1; }
  // Speed controls, resolved.
  int64_t render_width = 0, render_height = 0;  // where the model and the VAEs run (width × height without --render-*)
  int64_t evaluated_passes = 0;                 // model evaluations: steps, fewer with --reuse
  bool renders_smaller() const { return render_width != width || render_height != height; }
  // h3.c's native-256 adaptation (its h3_generate's spatial_rope_scale): 0.5 when the model's canvas is exactly
  // 256 × 256 pixels (an 8 × 8 token grid in the release) and use_reference_rope is off, else 1.
  double spatial_rope_scale() const;
  // The transformer attention's plan in words when it is sparse (Engine::validate; models/dit/dit_fasth3.h), else
  // empty.
  std::string attention_plan;
};
constexpr int64_t kHalvedRopeCanvas = 256;

// What a check covers: the whole request, or its settings alone (everything but the prompt: what a session holds
// before it has one).
enum class RequestCheck { Whole, SettingsOnly };
// Every violated rule, one sentence each (empty when the request is valid).
// `canvas_multiple` is the model's VAE spatial ratio × transformer patch (32 for the release), `transformer_blocks`
// its transformer's block count (--layers' range), `default_steps` the passes its checkpoint runs without --steps.
std::vector<std::string> request_problems(const GenerationRequest& r, int64_t canvas_multiple = kCanvasMultiple,
                                          RequestCheck scope = RequestCheck::Whole,
                                          int64_t transformer_blocks = kReleaseTransformerBlocks,
                                          int64_t default_steps = kDefaultSteps);
// Throws h3::Error listing every violated rule (one per line); otherwise resolves the canvas, the frame count and
// the passes.
ResolvedRequest validate_request(const GenerationRequest& r, int64_t canvas_multiple = kCanvasMultiple,
                                 RequestCheck scope = RequestCheck::Whole,
                                 int64_t transformer_blocks = kReleaseTransformerBlocks,
                                 int64_t default_steps = kDefaultSteps);
// The active speed controls in words ("reuse 2: 11 of 20 passes evaluate the model; ..."), empty for the exact path.
std::string describe_speed_controls(const ResolvedRequest& r);

}  // namespace h3

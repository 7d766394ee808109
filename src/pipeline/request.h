// One generation request and its validation. validate_request() runs before any expensive work and checks every
// limit at once; each violation is one sentence naming the rule and the valid range.
//
// Our limits (the engine's, not the reference pipeline's — see the notes in request.cpp):
//   width, height  multiples of 32, ≥ 32, width·height ≤ 768·1344
//   frames         rounded UP to 17·n + 5 (24 fps); the rounded count must lie in 5..362 (--frames 1..362)
//   seconds        alternative to frames (mutually exclusive): frames = round(seconds · 24), then as above
//   steps          model passes, 2..1000 (the reference's num_inference_steps = steps + 1 grid points)
//   seed           any uint64
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/snapshot.h"

namespace h3 {

constexpr int64_t kDefaultWidth = 864;
constexpr int64_t kDefaultHeight = 480;
constexpr int64_t kDefaultFrames = 124;  // 5.167 s
constexpr int64_t kDefaultSteps = 20;    // model passes
constexpr uint64_t kDefaultSeed = 42;

constexpr int64_t kCanvasMultiple = 32;            // VAE ÷16 × transformer patch 2
constexpr int64_t kMaxCanvasArea = 768 * 1344;     // the released canvas' area
constexpr int64_t kMinFrames = 5;                  // 17·0 + 5
constexpr int64_t kMaxFrames = 362;                // 17·21 + 5 (15.08 s)
constexpr int64_t kMinSteps = 2;
constexpr int64_t kMaxSteps = 1000;

struct GenerationRequest {
  std::string prompt;
  Workflow workflow = Workflow::T2VA;  // fl2va (keyframes) and ref2va (references) come later
  int64_t width = kDefaultWidth;
  int64_t height = kDefaultHeight;
  std::optional<int64_t> frames;   // --frames
  std::optional<double> seconds;   // --seconds (mutually exclusive with frames)
  int64_t steps = kDefaultSteps;   // model passes
  uint64_t seed = kDefaultSeed;
};

// A request that passed validation, with its derived quantities.
struct ResolvedRequest {
  GenerationRequest request;
  int64_t requested_frames = 0;  // before rounding (from --frames, --seconds or the default)
  int64_t frames = 0;            // 17·n + 5
  std::string frames_note;       // what the rounding did, empty when nothing was rounded
  int64_t grid_points() const { return request.steps + 1; }
};

// What a check covers: the whole request, or its settings alone (everything but the prompt: what a session holds
// before it has one).
enum class RequestCheck { Whole, SettingsOnly };
// Every violated rule, one sentence each (empty when the request is valid).
// `canvas_multiple` is the model's VAE spatial ratio × transformer patch (32 for the release).
std::vector<std::string> request_problems(const GenerationRequest& r, int64_t canvas_multiple = kCanvasMultiple,
                                          RequestCheck scope = RequestCheck::Whole);
// Throws h3::Error listing every violated rule (one per line); otherwise resolves the frame count.
ResolvedRequest validate_request(const GenerationRequest& r, int64_t canvas_multiple = kCanvasMultiple,
                                 RequestCheck scope = RequestCheck::Whole);

}  // namespace h3

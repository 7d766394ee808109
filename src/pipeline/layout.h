// The packed sequence the DiT attends over (spec/packing.md): row order, modality tags, index sets, float64 (t,h,w)
// rotary positions, and the per-pass timestep of every row (spec/sampling.md §6).
//
// One builder for every workflow, from a LayoutSpec: [text Nt][conditioning blocks][target audio 2A][target video
// F·P]. Conditioning rows (fl2va keyframes, ref2va references) go between the text and the target audio, lead the
// video/audio index sets, carry their own RowRole and therefore their own timestep rule, and are never updated by the
// sampler.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "pipeline/geometry.h"
#include "pipeline/schedule.h"
#include "tensor/tensor.h"

namespace h3 {

// Modality tags (checkpoint contract: they index the DiT's AdaLN table).
constexpr int64_t kTagVideo = 0;
constexpr int64_t kTagText = 1;
constexpr int64_t kTagAudio = 2;

// Rotary constants: one latent frame spans 5/3·p[f mod 5] units with p = (1, 4, 4, 4, 4); one audio latent 1 unit;
// the spatial axes are normalized by the geometric-mean side and scaled by 32.
constexpr double kRopeFrameRescale = 5.0 / 3.0;
constexpr int64_t kRopeFramesPerLatent[5] = {1, 4, 4, 4, 4};
constexpr double kRopeSpatialScale = 32.0;
// The timestep a visual conditioning row is held at (as float32: 0.99900001287).
constexpr float kConditionNoiseLevel = 0.999f;
// The timestep of a clean reference audio row.
constexpr float kReferenceAudioTimestep = 1.0f;

enum class RowRole : uint8_t { Text, ConditionVideo, TargetVideo, ReferenceAudio, TargetAudio };
constexpr int kRowRoles = 5;

struct PackedLayout {
  std::vector<int64_t> token_tags;  // L
  std::vector<RowRole> roles;       // L
  Tensor position_ids;              // [L, 3] F64: (t, h, w)
  std::vector<int64_t> video_indices, audio_indices, text_indices;  // a partition of [0, L), conditioning rows first
  int64_t num_condition_video_rows = 0, num_condition_audio_rows = 0;

  int64_t length() const { return static_cast<int64_t>(token_tags.size()); }
  int64_t num_text() const { return static_cast<int64_t>(text_indices.size()); }
};

// One aspect-normalized spatial axis of D latent pixels on a canvas of area `area` latent pixels: D/patch points
// 32·(left + k·step), numpy `linspace(left, left + D/√area, D/patch, endpoint=False)` semantics, float64.
std::vector<double> spatial_position_grid(int64_t dim, int64_t patch, int64_t area);
// The rotary time of every latent frame of a clip starting at `origin`: origin + sequential cumsum of 5/3·p.
std::vector<double> temporal_position_grid(int64_t latent_frames, double origin);

// numpy's pairwise summation of a float64 array (`np.sum`: blocks of 8 partial sums below 128 elements, halves
// above), reproduced because the reference sums the fl2va "last" anchor's time with it (spec/packing.md §5.3).
double numpy_pairwise_sum(const double* values, int64_t n);

// Which end of the generated video a keyframe is anchored to (spec/packing.md §5.3).
enum class KeyframeAnchor { First, Last };

// One reference block of a ref2va request (spec/packing.md §1, §5.3), sized as its encoder produced it.
struct ReferenceBlock {
  enum class Kind { Image, Video, Audio };
  Kind kind = Kind::Image;
  // Image and video: the latent canvas of the reference's own encode (an image is one latent frame).
  int64_t latent_frames = 1, latent_height = 0, latent_width = 0;
  // Audio: its latents per channel; video: its soundtrack's (0 for a silent video).
  int64_t audio_latents = 0;
};

// What one request's packed sequence holds (spec/packing.md §1).
struct LayoutSpec {
  // The presentation tags of the text rows (1 for plain text, 0 inside a vision block).
  std::vector<int64_t> text_tags;
  LatentGeometry target;
  // fl2va: one keyframe block of one latent frame on the target canvas per anchor, in packed order (first, then
  // last). t2va: none.
  std::vector<KeyframeAnchor> keyframes;
  // ref2va: the reference blocks in request order, on the shared audio/video rotary clock (never with keyframes).
  std::vector<ReferenceBlock> references;
  // Multiplies the h and w rotary coordinates of every row (text, conditioning, reference, audio and video rows
  // alike, as h3.c's prepare_rope scales them): 1 keeps the reference's (ResolvedRequest::spatial_rope_scale: h3.c's
  // 0.5 at 256 × 256).
  double spatial_rope_scale = 1.0;
};

PackedLayout build_layout(const LayoutSpec& spec);

// The timesteps of every pass of a request, computed once (spec/sampling.md §6).
class TimestepPlan {
 public:
  // `evaluated` (--reuse, pipeline/reuse.h): the passes that evaluate the model, one flag per pass; only their
  // timesteps are listed (the DiT precomputes a table row per timestep). Empty: every pass.
  static TimestepPlan make(const PackedLayout& layout, const FlowSchedule& video, const FlowSchedule& audio,
                           const std::vector<bool>& evaluated = {});

  int64_t passes() const { return static_cast<int64_t>(role_index_.size()); }
  // Every distinct timestep of the evaluated passes, ascending: what the DiT precomputes its tables for.
  const std::vector<float>& timesteps() const { return timesteps_; }
  // The timestep a row of `role` gets at `pass` (an evaluated pass).
  float timestep(int64_t pass, RowRole role) const;
  // Per row of the layout: its index into timesteps() at `pass` (an evaluated pass).
  std::vector<int64_t> row_indices(const PackedLayout& layout, int64_t pass) const;

 private:
  const std::array<int64_t, kRowRoles>& roles_at(int64_t pass) const;
  std::vector<float> timesteps_;
  std::vector<std::array<int64_t, kRowRoles>> role_index_;  // per pass, per role: index into timesteps_ (−1: none)
  std::vector<bool> evaluated_;                             // per pass
};

// The reference's per-pass form: the sorted distinct values of the row timesteps (`timestep`) and every row's index
// into them (`timestep_indices`), for comparisons with reference dumps.
struct PassTimesteps {
  std::vector<float> values;
  std::vector<int64_t> indices;
};
PassTimesteps reference_pass_timesteps(const PackedLayout& layout, const TimestepPlan& plan, int64_t pass);

}  // namespace h3

#include "pipeline/layout.h"

#include <algorithm>
#include <cmath>

// The positions must equal the reference's float64 values to the last bit: one rounding per written operation.
#include "util/strict_fp.h"

namespace h3 {

std::vector<double> spatial_position_grid(int64_t dim, int64_t patch, int64_t area) {
  H3_CHECK(dim > 0 && patch > 0 && area > 0 && dim % patch == 0, "bad spatial grid: ", dim, " latent pixels, patch ",
           patch);
  const double sqrt_area = std::sqrt(static_cast<double>(area));
  const double ratio = static_cast<double>(dim) / sqrt_area;
  const double left = (1.0 - ratio) / 2.0;
  const double stop = left + ratio;
  // numpy linspace(left, stop, n, endpoint=False): step = (stop − left)/n, value k = k·step + left; then ×32.
  const int64_t n = dim / patch;
  const double step = (stop - left) / static_cast<double>(n);
  std::vector<double> grid(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const double offset = static_cast<double>(k) * step;
    grid[k] = (offset + left) * kRopeSpatialScale;
  }
  return grid;
}

std::vector<double> temporal_position_grid(int64_t latent_frames, double origin) {
  std::vector<double> times(static_cast<size_t>(latent_frames));
  double elapsed = 0.0;  // sequential float64 cumsum of the spans of the earlier frames
  for (int64_t f = 0; f < latent_frames; ++f) {
    times[f] = origin + elapsed;
    elapsed += kRopeFrameRescale * static_cast<double>(kRopeFramesPerLatent[f % 5]);
  }
  return times;
}

namespace {

// Appends rows of one kind to a layout under construction.
struct LayoutBuilder {
  PackedLayout layout;
  std::vector<double> pos;  // L·3

  int64_t next_row() const { return static_cast<int64_t>(layout.roles.size()); }

  void add(RowRole role, int64_t tag, double t, double h, double w) {
    layout.roles.push_back(role);
    layout.token_tags.push_back(tag);
    pos.insert(pos.end(), {t, h, w});
  }

  void add_text(const std::vector<int64_t>& tags) {
    for (int64_t tag : tags) {
      layout.text_indices.push_back(next_row());
      add(RowRole::Text, tag, static_cast<double>(layout.text_indices.size() - 1), 0.0, 0.0);
    }
  }

  // Channel-major stereo audio block: channel 0 at w = width_grid.front(), channel 1 at width_grid.back().
  void add_audio(RowRole role, int64_t latents, double origin, const std::vector<double>& width_grid) {
    for (int64_t ch = 0; ch < kAudioStereoChannels; ++ch)
      for (int64_t a = 0; a < latents; ++a) {
        layout.audio_indices.push_back(next_row());
        add(role, kTagAudio, origin + static_cast<double>(a), 0.0, ch == 0 ? width_grid.front() : width_grid.back());
      }
  }

  // Video rows of a clip on its own canvas, frame-major then patch row then patch column.
  void add_video(RowRole role, const std::vector<double>& frame_times, const std::vector<double>& h_grid,
                 const std::vector<double>& w_grid) {
    for (double t : frame_times)
      for (double h : h_grid)
        for (double w : w_grid) {
          layout.video_indices.push_back(next_row());
          add(role, kTagVideo, t, h, w);
        }
  }

  PackedLayout finish(double spatial_rope_scale) {
    const int64_t L = next_row();
    layout.position_ids = Tensor::empty({L, 3}, DType::F64);
    double* p = layout.position_ids.ptr<double>();
    std::copy(pos.begin(), pos.end(), p);
    // A power of two (h3.c's 0.5) scales exactly in float64.
    if (spatial_rope_scale != 1.0)
      for (int64_t row = 0; row < L; ++row) {
        p[row * 3 + 1] *= spatial_rope_scale;
        p[row * 3 + 2] *= spatial_rope_scale;
      }
    for (RowRole r : layout.roles) {
      layout.num_condition_video_rows += r == RowRole::ConditionVideo;
      layout.num_condition_audio_rows += r == RowRole::ReferenceAudio;
    }
    return std::move(layout);
  }
};

}  // namespace

double numpy_pairwise_sum(const double* values, int64_t n) {
  constexpr int64_t kUnroll = 8, kBlock = 128;  // numpy's pairwise_sum (loops_utils.h): PW_BLOCKSIZE 128
  if (n < kUnroll) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += values[i];
    return sum;
  }
  if (n <= kBlock) {
    double r[kUnroll];
    for (int64_t j = 0; j < kUnroll; ++j) r[j] = values[j];
    int64_t i = kUnroll;
    for (; i < n - n % kUnroll; i += kUnroll)
      for (int64_t j = 0; j < kUnroll; ++j) r[j] += values[i + j];
    double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) sum += values[i];
    return sum;
  }
  int64_t half = n / 2;
  half -= half % kUnroll;
  return numpy_pairwise_sum(values, half) + numpy_pairwise_sum(values + half, n - half);
}

namespace {

// The rotary time of a keyframe block (spec/packing.md §5.3): "first" at τ = Nt; "last" at the final pixel frame,
// Nt + (the pairwise sum of every latent frame's span) − 5/3, as the reference's build_packed_sequence sums it.
double keyframe_time(KeyframeAnchor anchor, double origin, int64_t latent_frames) {
  if (anchor == KeyframeAnchor::First) return origin;
  std::vector<double> spans(static_cast<size_t>(latent_frames));
  for (int64_t f = 0; f < latent_frames; ++f)
    spans[f] = kRopeFrameRescale * static_cast<double>(kRopeFramesPerLatent[f % 5]);
  return origin + numpy_pairwise_sum(spans.data(), latent_frames) - kRopeFrameRescale;
}

// The ref2va reference blocks in request order on the shared audio/video rotary clock (spec/packing.md §5.3; the
// reference's build_ref2va_packed_sequence), starting at `clock`; returns where the clock ends, the origin of the
// target audio and video. An image takes one integer slot; a standalone audio block its latents, on the target's
// width extremes; a video its soundtrack's rows first (on its own width extremes), then its frames, and the clock
// moves by the longer of the two (the frames' span summed sequentially, as the reference sums it there).
double add_references(LayoutBuilder& b, const std::vector<ReferenceBlock>& refs, const std::array<int64_t, 3>& patch,
                      double clock, const std::vector<double>& target_w_grid) {
  for (const ReferenceBlock& r : refs) {
    if (r.kind == ReferenceBlock::Kind::Audio) {
      H3_CHECK(r.audio_latents >= 1, "an audio reference needs at least one latent, got ", r.audio_latents);
      b.add_audio(RowRole::ReferenceAudio, r.audio_latents, clock, target_w_grid);
      clock += static_cast<double>(r.audio_latents);
      continue;
    }
    H3_CHECK(r.latent_frames >= 1 && r.latent_height > 0 && r.latent_width > 0 &&
                 r.latent_height % patch[1] == 0 && r.latent_width % patch[2] == 0,
             "a visual reference needs whole patches, got ", r.latent_frames, " latent frames of ", r.latent_height,
             "x", r.latent_width);
    const int64_t area = r.latent_height * r.latent_width;
    const std::vector<double> h_grid = spatial_position_grid(r.latent_height, patch[1], area);
    const std::vector<double> w_grid = spatial_position_grid(r.latent_width, patch[2], area);
    if (r.kind == ReferenceBlock::Kind::Image) {
      H3_CHECK(r.latent_frames == 1, "an image reference is one latent frame, got ", r.latent_frames);
      b.add_video(RowRole::ConditionVideo, {clock}, h_grid, w_grid);
      clock += 1.0;
      continue;
    }
    if (r.audio_latents > 0) b.add_audio(RowRole::ReferenceAudio, r.audio_latents, clock, w_grid);
    b.add_video(RowRole::ConditionVideo, temporal_position_grid(r.latent_frames, clock), h_grid, w_grid);
    double span = 0.0;
    for (int64_t f = 0; f < r.latent_frames; ++f)
      span += kRopeFrameRescale * static_cast<double>(kRopeFramesPerLatent[f % 5]);
    clock += std::max(static_cast<double>(r.audio_latents), span);
  }
  return clock;
}

}  // namespace

PackedLayout build_layout(const LayoutSpec& spec) {
  const std::vector<int64_t>& text_tags = spec.text_tags;
  const LatentGeometry& g = spec.target;
  H3_CHECK(!text_tags.empty(), "the packed sequence needs at least one text row");
  for (int64_t tag : text_tags)
    H3_CHECK(tag == kTagText || tag == kTagVideo, "a text row's tag must be ", kTagText, " (text) or ", kTagVideo,
             " (vision block), got ", tag);
  H3_CHECK(g.patch[0] == 1, "the rotary layout assumes a temporal patch of 1, got ", g.patch[0]);
  H3_CHECK(spec.keyframes.size() <= 2, "a request has at most two keyframes (first and last), got ",
           spec.keyframes.size());
  const int64_t area = g.latent_height * g.latent_width;
  const std::vector<double> h_grid = spatial_position_grid(g.latent_height, g.patch[1], area);
  const std::vector<double> w_grid = spatial_position_grid(g.latent_width, g.patch[2], area);
  // Text length shifts the whole media clock: conditioning, target audio and video start at τ = Nt.
  const double origin = static_cast<double>(text_tags.size());

  H3_CHECK(spec.keyframes.empty() || spec.references.empty(),
           "a packed sequence holds keyframes (fl2va) or references (ref2va), not both");

  LayoutBuilder b;
  b.add_text(text_tags);
  for (KeyframeAnchor anchor : spec.keyframes)
    b.add_video(RowRole::ConditionVideo, {keyframe_time(anchor, origin, g.latent_frames)}, h_grid, w_grid);
  const double media_origin = add_references(b, spec.references, g.patch, origin, w_grid);
  b.add_audio(RowRole::TargetAudio, g.audio_latents, media_origin, w_grid);
  b.add_video(RowRole::TargetVideo, temporal_position_grid(g.latent_frames, media_origin), h_grid, w_grid);
  H3_CHECK(std::isfinite(spec.spatial_rope_scale) && spec.spatial_rope_scale > 0,
           "the spatial rotary scale must be a positive number, got ", spec.spatial_rope_scale);
  return b.finish(spec.spatial_rope_scale);
}

namespace {

float role_timestep(RowRole role, float video_t, float audio_t) {
  switch (role) {
    case RowRole::Text:
    case RowRole::TargetVideo: return video_t;
    case RowRole::ConditionVideo: return std::max(video_t, kConditionNoiseLevel);
    case RowRole::ReferenceAudio: return kReferenceAudioTimestep;
    case RowRole::TargetAudio: return audio_t;
  }
  fail("unknown row role");
}

}  // namespace

TimestepPlan TimestepPlan::make(const PackedLayout& layout, const FlowSchedule& video, const FlowSchedule& audio,
                                const std::vector<bool>& evaluated) {
  H3_CHECK(video.passes() == audio.passes(), "the video and audio schedules must have the same number of passes, got ",
           video.passes(), " and ", audio.passes());
  H3_CHECK(evaluated.empty() || static_cast<int64_t>(evaluated.size()) == video.passes(), "the evaluated passes give ",
           evaluated.size(), " flags for ", video.passes(), " passes");
  std::array<bool, kRowRoles> present{};
  for (RowRole r : layout.roles) present[static_cast<int>(r)] = true;

  TimestepPlan plan;
  plan.evaluated_ = evaluated.empty() ? std::vector<bool>(static_cast<size_t>(video.passes()), true) : evaluated;
  std::vector<float> all;
  for (int64_t i = 0; i < video.passes(); ++i)
    for (int r = 0; r < kRowRoles; ++r)
      if (present[r] && plan.evaluated_[i])
        all.push_back(role_timestep(static_cast<RowRole>(r), video.timesteps()[i], audio.timesteps()[i]));
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  plan.timesteps_ = std::move(all);

  plan.role_index_.resize(static_cast<size_t>(video.passes()));
  for (int64_t i = 0; i < video.passes(); ++i)
    for (int r = 0; r < kRowRoles; ++r) {
      const float t = role_timestep(static_cast<RowRole>(r), video.timesteps()[i], audio.timesteps()[i]);
      const auto it = std::lower_bound(plan.timesteps_.begin(), plan.timesteps_.end(), t);
      plan.role_index_[i][r] = present[r] && plan.evaluated_[i] ? it - plan.timesteps_.begin() : -1;
    }
  return plan;
}

const std::array<int64_t, kRowRoles>& TimestepPlan::roles_at(int64_t pass) const {
  H3_CHECK(pass >= 0 && pass < passes(), "pass ", pass, " is outside the plan's ", passes(), " passes");
  H3_CHECK(evaluated_[pass], "pass ", pass, " does not evaluate the model (--reuse): it has no timesteps");
  return role_index_[pass];
}

float TimestepPlan::timestep(int64_t pass, RowRole role) const {
  const int64_t index = roles_at(pass)[static_cast<int>(role)];
  H3_CHECK(index >= 0, "the layout has no rows of the requested role");
  return timesteps_[index];
}

std::vector<int64_t> TimestepPlan::row_indices(const PackedLayout& layout, int64_t pass) const {
  const auto& by_role = roles_at(pass);
  std::vector<int64_t> out(layout.roles.size());
  for (size_t row = 0; row < out.size(); ++row) out[row] = by_role[static_cast<int>(layout.roles[row])];
  return out;
}

PassTimesteps reference_pass_timesteps(const PackedLayout& layout, const TimestepPlan& plan, int64_t pass) {
  PassTimesteps out;
  std::vector<float> row_values(layout.roles.size());
  for (size_t row = 0; row < row_values.size(); ++row) row_values[row] = plan.timestep(pass, layout.roles[row]);
  out.values = row_values;
  std::sort(out.values.begin(), out.values.end());
  out.values.erase(std::unique(out.values.begin(), out.values.end()), out.values.end());
  out.indices.resize(row_values.size());
  for (size_t row = 0; row < row_values.size(); ++row)
    out.indices[row] = std::lower_bound(out.values.begin(), out.values.end(), row_values[row]) - out.values.begin();
  return out;
}

}  // namespace h3

#include "pipeline/references.h"

#include <algorithm>
#include <cmath>

#include "media/image_input.h"
#include "media/image_resize.h"
#include "media/media_source.h"
#include "media/video_input.h"
#include "models/qwen3vl/video_processor.h"
#include "util/error.h"

namespace h3 {

namespace {

using Kind = ReferenceInput::Kind;
using Sound = ReferenceInput::Soundtrack;

int64_t round_to_multiple(double value, int64_t multiple) {
  // Python's round(): half to even, which nearbyint gives in the default rounding mode.
  const double m = std::nearbyint(value / static_cast<double>(multiple)) * static_cast<double>(multiple);
  return std::max<int64_t>(multiple, static_cast<int64_t>(m));
}

double generated_seconds(int64_t frames) { return static_cast<double>(frames) / static_cast<double>(kVideoFps); }

// The reference's aspect rule for an image reference (before_encoder.py: `width > 4 * height or height > 4 * width`).
void check_image_aspect(const std::string& source, int64_t width, int64_t height) {
  if (width > 4 * height || height > 4 * width)
    fail(source, ": a reference image must be within 1:4 and 4:1, got ", width, "x", height, " pixels.");
}

// The least number of 24 fps frames a video reference needs for the conditioner to read temporal_patch frames of
// it at kVideoConditionSampleFps (encoders.py _sample_video_condition_frames' minimum).
int64_t min_reference_video_frames(int64_t temporal_patch) {
  const double stride = static_cast<double>(kVideoFps) / kVideoConditionSampleFps;
  return static_cast<int64_t>(std::nearbyint(static_cast<double>(temporal_patch - 1) * stride)) + 1;
}

// Where an audio input's samples come from: an audio reference's file, a video's own soundtrack, or a replacement.
struct AudioSource {
  std::string path;
  AudioRole role = AudioRole::AudioReference;
};
std::optional<AudioSource> audio_source(const ReferenceInput& ref) {
  if (ref.kind == Kind::Audio) return AudioSource{ref.path, AudioRole::AudioReference};
  if (ref.kind != Kind::Video || ref.soundtrack == Sound::None) return std::nullopt;
  if (ref.soundtrack == Sound::Replaced) return AudioSource{ref.soundtrack_path, AudioRole::AudioReference};
  return AudioSource{ref.path, AudioRole::VideoSoundtrack};
}

std::string total_audio_problem(double seconds) {
  return cat("The reference audio lasts ", seconds, " s in all (every --ref-audio and video soundtrack, each cut to "
             "the generated duration); at most ", kMaxReferenceAudioSecondsInAll,
             " s are accepted: use fewer audio inputs or fewer frames.");
}

}  // namespace

CanvasSize reference_image_canvas(int64_t width, int64_t height, ReferenceImageSize mode, int64_t short_edge,
                                  int64_t target_width, int64_t target_height, int64_t multiple) {
  H3_CHECK(width > 0 && height > 0 && short_edge > 0 && target_width > 0 && target_height > 0 && multiple > 0,
           "a reference image canvas needs positive sizes, got ", width, "x", height);
  const double w = static_cast<double>(width), h = static_cast<double>(height);
  const double scale = mode == ReferenceImageSize::Max
                           ? static_cast<double>(short_edge) / static_cast<double>(std::min(width, height))
                           : std::min(1.0, std::sqrt(static_cast<double>(target_width) *
                                                     static_cast<double>(target_height) / (w * h)));
  CanvasSize c;
  c.height = round_to_multiple(h * scale, multiple);
  c.width = round_to_multiple(w * scale, multiple);
  return c;
}

int64_t reference_video_encode_frames(int64_t frames, int64_t clip_length, int64_t tokens_per_clip) {
  H3_CHECK(frames >= 1 && clip_length >= 1 && tokens_per_clip >= 1, "a video reference needs at least one frame");
  // Python's floor division: a reference shorter than tokens_per_clip still asks for one clip.
  const int64_t d = frames - tokens_per_clip;
  const int64_t clips = std::max<int64_t>(1, d >= 0 ? d / clip_length : -((-d + clip_length - 1) / clip_length));
  return std::min(frames, clips * clip_length + tokens_per_clip);
}

std::vector<std::string> reference_media_problems(const GenerationRequest& request, int64_t frames,
                                                  const ReferenceRules& rules) {
  std::vector<std::string> out;
  const double duration = generated_seconds(frames);
  double audio_seconds = 0;
  auto guarded = [&](auto&& check) {
    try {
      check();
    } catch (const Error& e) {
      out.push_back(e.what());
    }
  };
  for (const ReferenceInput& ref : request.references) {
    if (ref.kind == Kind::Image) {
      guarded([&] {
        const ImageInfo info = probe_image_file(ref.path);
        check_image_aspect(ref.path, info.width, info.height);
      });
    } else if (ref.kind == Kind::Video) {
      guarded([&] {
        const VideoProbe v = probe_video(MediaSource::file(ref.path));
        resolve_canvas_size(v.width, v.height, rules.canvas_multiple, rules.canvas.canvas_short_edge,
                            rules.canvas.canvas_max_pixels, cat(ref.path, " (", v.width, "x", v.height, " pixels)"));
        const int64_t needed = min_reference_video_frames(rules.temporal_patch);
        if (v.duration_seconds >= 0 && v.duration_seconds * kVideoFps + 0.5 < static_cast<double>(needed))
          fail(ref.path, ": a reference video is read at ", kVideoConditionSampleFps, " fps in groups of ",
               rules.temporal_patch, " frames, so it must last at least ", needed, " frames at ", kVideoFps, " fps (",
               static_cast<double>(needed) / kVideoFps, " s), got ", v.duration_seconds, " s.");
        if (ref.soundtrack == Sound::Own && !v.has_audio)
          fail(ref.path, " has no audio stream: use --ref-silent-video for a video reference without sound, or "
                         "--ref-video-audio to give it one.");
      });
    }
    if (const std::optional<AudioSource> a = audio_source(ref)) {
      guarded([&] {
        const AudioProbe p = probe_audio(MediaSource::file(a->path));
        if (p.duration_seconds >= 0 && p.duration_seconds < kMinReferenceAudioSeconds)
          fail(a->path, ": reference audio must last at least ", kMinReferenceAudioSeconds, " s, got ",
               p.duration_seconds, " s.");
        audio_seconds += p.duration_seconds >= 0 ? std::min(p.duration_seconds, duration) : duration;
      });
    }
  }
  if (audio_seconds > kMaxReferenceAudioSecondsInAll) out.push_back(total_audio_problem(audio_seconds));
  return out;
}

std::vector<ReferenceFootprint> reference_footprints(const GenerationRequest& request, int64_t frames,
                                                     int64_t target_width, int64_t target_height,
                                                     const ReferenceRules& rules) {
  std::vector<ReferenceFootprint> out;
  const double duration = generated_seconds(frames);
  for (const ReferenceInput& ref : request.references) {
    ReferenceFootprint f;
    if (ref.kind == Kind::Image) {
      f.kind = ReferenceFootprint::Kind::Image;
      const ImageInfo info = probe_image_file(ref.path);
      const CanvasSize c = reference_image_canvas(info.width, info.height, request.reference_image_size,
                                                  rules.canvas.reference_image_short_edge, target_width,
                                                  target_height, rules.canvas_multiple);
      f.width = c.width;
      f.height = c.height;
    } else if (ref.kind == Kind::Video) {
      f.kind = ReferenceFootprint::Kind::Video;
      const VideoProbe v = probe_video(MediaSource::file(ref.path));
      const CanvasSize c = resolve_canvas_size(v.width, v.height, rules.canvas_multiple, rules.canvas.canvas_short_edge,
                                               rules.canvas.canvas_max_pixels, ref.path);
      f.width = c.width;
      f.height = c.height;
      f.frames = v.duration_seconds >= 0
                     ? std::clamp<int64_t>(static_cast<int64_t>(std::ceil(v.duration_seconds * kVideoFps)), 1, frames)
                     : frames;
    } else {
      f.kind = ReferenceFootprint::Kind::Audio;
    }
    if (const std::optional<AudioSource> a = audio_source(ref)) {
      const AudioProbe p = probe_audio(MediaSource::file(a->path));
      const double seconds = p.duration_seconds >= 0 ? std::min(p.duration_seconds, duration) : duration;
      f.audio_samples = static_cast<int64_t>(std::ceil(seconds * rules.audio_rate));
    }
    out.push_back(f);
  }
  return out;
}

std::vector<NormalizedReference> normalize_references(const GenerationRequest& request, int64_t frames,
                                                      int64_t target_width, int64_t target_height,
                                                      const ReferenceRules& rules) {
  std::vector<NormalizedReference> out;
  double audio_seconds = 0;
  for (const ReferenceInput& ref : request.references) {
    NormalizedReference n;
    n.kind = ref.kind;
    n.source = ref.path;
    if (ref.kind == Kind::Image) {
      Rgb8Image image = read_image_file(ref.path);
      check_image_aspect(ref.path, image.width, image.height);
      const CanvasSize c = reference_image_canvas(image.width, image.height, request.reference_image_size,
                                                  rules.canvas.reference_image_short_edge, target_width,
                                                  target_height, rules.canvas_multiple);
      n.image = c.width == image.width && c.height == image.height
                    ? std::move(image)
                    : resize_rgb8(image, static_cast<int>(c.width), static_cast<int>(c.height));
    } else if (ref.kind == Kind::Video) {
      const MediaSource source = MediaSource::file(ref.path);
      const VideoProbe v = probe_video(source);
      const CanvasSize c =
          resolve_canvas_size(v.width, v.height, rules.canvas_multiple, rules.canvas.canvas_short_edge,
                              rules.canvas.canvas_max_pixels, cat(ref.path, " (", v.width, "x", v.height, " pixels)"));
      n.frames = read_reference_video(source, frames, static_cast<int>(c.width), static_cast<int>(c.height));
      // The conditioner's reading of it must hold a whole temporal patch (throws the reference's sentence).
      sample_video_condition_frames(n.frames.frames, kVideoFps, kVideoConditionSampleFps, rules.temporal_patch);
    }
    if (const std::optional<AudioSource> a = audio_source(ref)) {
      n.audio = read_reference_audio(MediaSource::file(a->path), frames, a->role, kMinReferenceAudioSeconds,
                                     rules.audio_rate);
      audio_seconds += static_cast<double>(n.audio->frames()) / rules.audio_rate;
    }
    out.push_back(std::move(n));
  }
  if (audio_seconds > kMaxReferenceAudioSecondsInAll) fail(total_audio_problem(audio_seconds));
  return out;
}

}  // namespace h3

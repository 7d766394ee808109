#include "pipeline/references.h"

#include <algorithm>
#include <cmath>

#include "media/image_input.h"
#include "media/image_resize.h"
#include "media/media_source.h"
#include "media/video_input.h"
#include "models/qwen3vl/video_processor.h"
#include "models/video_vae/encoder.h"
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

// Where an audio input's samples come from: an audio reference's file, a video's own soundtrack, a replacement, or
// a waveform in memory.
struct AudioSource {
  std::string path;
  AudioRole role = AudioRole::AudioReference;
  const Waveform* waveform = nullptr;  // in memory
  std::string describe() const {
    return waveform ? cat("an in-memory waveform of ", waveform->frames(), " samples at ", waveform->sample_rate, " Hz")
                    : path;
  }
};
std::optional<AudioSource> audio_source(const ReferenceInput& ref) {
  if (ref.kind == Kind::Image || (ref.kind == Kind::Video && ref.soundtrack == Sound::None)) return std::nullopt;
  if (ref.in_memory()) return AudioSource{"", AudioRole::AudioReference, ref.audio.get()};
  if (ref.kind == Kind::Audio) return AudioSource{ref.path, AudioRole::AudioReference};
  if (ref.soundtrack == Sound::Replaced) return AudioSource{ref.soundtrack_path, AudioRole::AudioReference};
  return AudioSource{ref.path, AudioRole::VideoSoundtrack};
}

// The size of an image reference, from its file's header or its pixels.
std::pair<int64_t, int64_t> image_size(const ReferenceInput& ref) {
  if (!ref.image) {
    // As the reference opens it (references.py from_file: diffusers' load_image, EXIF orientation applied).
    const ImageInfo info = probe_image_file_upright(ref.path);
    return {info.upright_width(), info.upright_height()};
  }
  const Rgb8Image& p = *ref.image;
  H3_CHECK(p.width > 0 && p.height > 0 && p.rgb.size() == static_cast<size_t>(p.width) * p.height * 3,
           ref.describe(), ": an RGB8 picture needs width·height·3 bytes and a positive size, got ", p.rgb.size(),
           " bytes");
  return {p.width, p.height};
}

// What a video reference's header (or its frames) says: its upright size, its duration (−1: unknown), whether a
// soundtrack is there.
struct VideoFacts {
  int64_t width = 0, height = 0;
  double seconds = -1;
  bool has_audio = false;
};
VideoFacts video_facts(const ReferenceInput& ref) {
  if (!ref.video) {
    const VideoProbe v = probe_video(MediaSource::file(ref.path));
    return {v.width, v.height, v.duration_seconds, v.has_audio};
  }
  const DecodedVideo& d = *ref.video;
  H3_CHECK(d.frames.frames > 0 && d.frames.width > 0 && d.frames.height > 0 &&
               d.frames.rgb.size() == d.frames.frame_bytes() * static_cast<size_t>(d.frames.frames),
           ref.describe(), ": in-memory frames need frames·width·height·3 bytes and at least one frame");
  H3_CHECK(std::isfinite(d.fps) && d.fps > 0, ref.describe(), ": a reference video must have a positive frame rate, got ",
           d.fps, ".");
  return {d.frames.width, d.frames.height, static_cast<double>(d.frames.frames) / d.fps, ref.audio != nullptr};
}

// An audio input's duration (−1: unknown), from its file's header or its samples.
double audio_seconds_of(const AudioSource& a) {
  if (!a.waveform) return probe_audio(MediaSource::file(a.path)).duration_seconds;
  const Waveform& w = *a.waveform;
  H3_CHECK((w.channels == 1 || w.channels == 2) && w.sample_rate > 0 && w.frames() > 0, a.describe(),
           ": a reference waveform must be mono or stereo, with a positive rate and samples");
  return static_cast<double>(w.frames()) / w.sample_rate;
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

ReferenceVisionInputs reference_vision_inputs(const std::vector<NormalizedReference>& refs,
                                              const ImageProcessorConfig& image_processor,
                                              const VideoProcessorConfig* video_processor, int64_t temporal_patch) {
  std::vector<Rgb8Image> images;
  std::vector<Rgb8Video> clips;
  std::vector<std::vector<double>> timestamps;
  for (const NormalizedReference& n : refs) {
    if (n.kind == Kind::Image) images.push_back(n.image);
    if (n.kind != Kind::Video) continue;
    const VideoConditionFrames read =
        sample_video_condition_frames(n.frames.frames, kVideoFps, kVideoConditionSampleFps, temporal_patch);
    clips.push_back(select_frames(n.frames, read.indices));
    timestamps.push_back(read.block_timestamps);
  }
  ReferenceVisionInputs out;
  if (!images.empty()) out.images = prepare_images(image_processor, images);
  if (!clips.empty()) {
    H3_CHECK(video_processor, "the snapshot's processor/ has no video-processor settings, which a video reference "
             "needs");
    out.videos = prepare_videos(*video_processor, clips);
  }
  size_t image = 0, video = 0;
  for (const NormalizedReference& n : refs) {
    Ref2vaReference p;
    p.has_audio = n.has_audio();
    if (n.kind == Kind::Image) {
      p.kind = Ref2vaReference::Kind::Image;
      p.grid = out.images->grids[image++];
    } else if (n.kind == Kind::Video) {
      p.kind = Ref2vaReference::Kind::Video;
      p.grid = out.videos->grids[video];
      p.block_timestamps = timestamps[video++];
    } else {
      p.kind = Ref2vaReference::Kind::Audio;
    }
    out.presented.push_back(std::move(p));
  }
  return out;
}

Tensor waveform_tensor(const Waveform& w) {
  Tensor t = Tensor::empty({w.channels, w.frames()}, DType::F32);
  std::copy(w.samples.begin(), w.samples.end(), t.ptr<float>());
  return t;
}

Rgb8Video reference_video_encode_clip(const Rgb8Video& video, const VideoVaeConfig& vae) {
  Rgb8Video clip = video;
  clip.frames = static_cast<int>(
      reference_video_encode_frames(video.frames, vae.clip_length, VideoVaeEncoder::latent_tokens_per_clip(vae)));
  clip.rgb.resize(clip.frame_bytes() * static_cast<size_t>(clip.frames));
  return clip;
}

std::vector<std::string> reference_media_problems(const GenerationRequest& request, int64_t frames,
                                                  const ReferenceRules& rules) {
  std::vector<std::string> out;
  const double duration = generated_seconds(frames);
  double audio_seconds = 0;
  auto guarded = [&](auto&& check) {
    try {
      check();
      return true;
    } catch (const Error& e) {
      out.push_back(e.what());
      return false;
    }
  };
  for (const ReferenceInput& ref : request.references) {
    if (ref.kind == Kind::Image) {
      guarded([&] {
        const auto [width, height] = image_size(ref);
        check_image_aspect(ref.describe(), width, height);
      });
    } else if (ref.kind == Kind::Video) {
      // A video refused for its own reasons is not looked at again for its soundtrack (one sentence per file).
      const bool video_ok = guarded([&] {
        const VideoFacts v = video_facts(ref);
        resolve_canvas_size(v.width, v.height, rules.canvas_multiple, rules.canvas.canvas_short_edge,
                            rules.canvas.canvas_max_pixels, cat(ref.describe(), " (", v.width, "x", v.height, " pixels)"));
        const int64_t needed = min_reference_video_frames(rules.temporal_patch);
        if (v.seconds >= 0 && v.seconds * kVideoFps + 0.5 < static_cast<double>(needed))
          fail(ref.describe(), ": a reference video is read at ", kVideoConditionSampleFps, " fps in groups of ",
               rules.temporal_patch, " frames, so it must last at least ", needed, " frames at ", kVideoFps, " fps (",
               static_cast<double>(needed) / kVideoFps, " s), got ", v.seconds, " s.");
        if (!ref.in_memory() && ref.soundtrack == Sound::Own && !v.has_audio)
          fail(ref.path, " has no audio stream: use --ref-silent-video for a video reference without sound, or "
                         "--ref-video-audio to give it one.");
      });
      if (!video_ok && ref.soundtrack == Sound::Own) continue;
    }
    if (const std::optional<AudioSource> a = audio_source(ref)) {
      guarded([&] {
        const double seconds = audio_seconds_of(*a);
        if (seconds >= 0 && seconds < kMinReferenceAudioSeconds)
          fail(a->describe(), ": reference audio must last at least ", kMinReferenceAudioSeconds, " s, got ", seconds,
               " s.");
        audio_seconds += seconds >= 0 ? std::min(seconds, duration) : duration;
      });
    }
  }
  if (audio_seconds > kMaxReferenceAudioSecondsInAll) out.push_back(total_audio_problem(audio_seconds));
  return out;
}

std::vector<ReferenceFootprint> reference_footprints(const GenerationRequest& request, int64_t frames,
                                                     int64_t target_width, int64_t target_height,
                                                     const ReferenceRules& rules, const VideoVaeConfig& vae) {
  const int64_t tokens_per_clip = VideoVaeEncoder::latent_tokens_per_clip(vae);
  std::vector<ReferenceFootprint> out;
  const double duration = generated_seconds(frames);
  for (const ReferenceInput& ref : request.references) {
    ReferenceFootprint f;
    if (ref.kind == Kind::Image) {
      f.kind = ReferenceFootprint::Kind::Image;
      const auto [width, height] = image_size(ref);
      const CanvasSize c = reference_image_canvas(width, height, request.reference_image_size,
                                                  rules.canvas.reference_image_short_edge, target_width,
                                                  target_height, rules.canvas_multiple);
      f.width = c.width;
      f.height = c.height;
    } else if (ref.kind == Kind::Video) {
      f.kind = ReferenceFootprint::Kind::Video;
      const VideoFacts v = video_facts(ref);
      const CanvasSize c = resolve_canvas_size(v.width, v.height, rules.canvas_multiple, rules.canvas.canvas_short_edge,
                                               rules.canvas.canvas_max_pixels, ref.describe());
      f.width = c.width;
      f.height = c.height;
      f.frames = v.seconds >= 0 ? std::clamp<int64_t>(static_cast<int64_t>(std::ceil(v.seconds * kVideoFps)), 1, frames)
                                : frames;
      f.encode_frames = reference_video_encode_frames(f.frames, vae.clip_length, tokens_per_clip);
    } else {
      f.kind = ReferenceFootprint::Kind::Audio;
    }
    if (const std::optional<AudioSource> a = audio_source(ref)) {
      const double s = audio_seconds_of(*a);
      const double seconds = s >= 0 ? std::min(s, duration) : duration;
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
    n.source = ref.describe();
    if (ref.kind == Kind::Image) {
      image_size(ref);  // an in-memory picture's own checks
      Rgb8Image image = ref.image ? *ref.image : read_image_file_upright(ref.path);
      check_image_aspect(n.source, image.width, image.height);
      const CanvasSize c = reference_image_canvas(image.width, image.height, request.reference_image_size,
                                                  rules.canvas.reference_image_short_edge, target_width,
                                                  target_height, rules.canvas_multiple);
      n.image = c.width == image.width && c.height == image.height
                    ? std::move(image)
                    : resize_rgb8(image, static_cast<int>(c.width), static_cast<int>(c.height));
    } else if (ref.kind == Kind::Video) {
      const VideoFacts v = video_facts(ref);
      const CanvasSize c =
          resolve_canvas_size(v.width, v.height, rules.canvas_multiple, rules.canvas.canvas_short_edge,
                              rules.canvas.canvas_max_pixels, cat(n.source, " (", v.width, "x", v.height, " pixels)"));
      n.frames = ref.video ? normalize_reference_video(ref.video->frames, ref.video->fps, frames,
                                                       static_cast<int>(c.width), static_cast<int>(c.height))
                           : read_reference_video(MediaSource::file(ref.path), frames, static_cast<int>(c.width),
                                                  static_cast<int>(c.height));
      // The conditioner's reading of it must hold a whole temporal patch (throws the reference's sentence).
      sample_video_condition_frames(n.frames.frames, kVideoFps, kVideoConditionSampleFps, rules.temporal_patch);
    }
    if (const std::optional<AudioSource> a = audio_source(ref)) {
      if (a->waveform) {
        const double seconds = audio_seconds_of(*a);
        if (seconds < kMinReferenceAudioSeconds)
          fail(a->describe(), ": reference audio must last at least ", kMinReferenceAudioSeconds, " s, got ", seconds,
               " s.");
        n.audio = normalize_reference_audio(*a->waveform, frames, rules.audio_rate);
      } else {
        n.audio = read_reference_audio(MediaSource::file(a->path), frames, a->role, kMinReferenceAudioSeconds,
                                       rules.audio_rate);
      }
      audio_seconds += static_cast<double>(n.audio->frames()) / rules.audio_rate;
    }
    out.push_back(std::move(n));
  }
  if (audio_seconds > kMaxReferenceAudioSecondsInAll) fail(total_audio_problem(audio_seconds));
  return out;
}

}  // namespace h3

#include "pipeline/request.h"

#include <cmath>
#include <cstdio>

#include "models/dit/dit_layers.h"
#include "pipeline/geometry.h"
#include "pipeline/reuse.h"

// Where the reference pipeline (diffusers modular MiniMax-H3) differs — we keep ours:
// - duration: it requires the rounded frame count to last 5..15 s (124..345 frames); we accept 5..362 frames;
// - canvas: it only requires multiples of 32 for an explicit size (no area cap) and defaults to 768 × 1344; we cap
//   the area at 768·1344 and default to 864 × 480;
// - steps: its num_inference_steps counts grid points (≥ 2, no upper bound); ours counts passes, 2..1000;
// - aspect ratio: it limits only a canvas derived from a keyframe (1:4..4:1); we do not limit explicit sizes.

namespace h3 {

ImageInput ImageInput::file(std::string path) {
  ImageInput in;
  in.path = std::move(path);
  return in;
}

ImageInput ImageInput::rgb8(Rgb8Image image) {
  ImageInput in;
  in.pixels = std::make_shared<const Rgb8Image>(std::move(image));
  return in;
}

std::string ImageInput::describe() const {
  if (is_file()) return path;
  return cat("an RGB8 picture of ", pixels->width, "×", pixels->height, " pixels");
}

std::string ReferenceInput::describe() const {
  if (!in_memory()) return path;
  if (image) return cat("an in-memory picture of ", image->width, "×", image->height, " pixels");
  if (video)
    return cat("an in-memory clip of ", video->frames.frames, " frames of ", video->frames.width, "×",
               video->frames.height, " pixels at ", video->fps, " fps");
  return cat("an in-memory waveform of ", audio->frames(), " samples at ", audio->sample_rate, " Hz");
}

const char* reference_image_size_name(ReferenceImageSize s) { return s == ReferenceImageSize::Max ? "max" : "match"; }

Workflow GenerationRequest::workflow() const {
  if (!references.empty()) return Workflow::Ref2VA;
  if (has_keyframes()) return Workflow::FL2VA;
  return Workflow::T2VA;
}

namespace {

std::string seconds_str(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

double frames_to_seconds(int64_t frames) { return static_cast<double>(frames) / static_cast<double>(kFps); }

void check_side(const char* name, int64_t value, int64_t multiple, std::vector<std::string>& out) {
  if (value < multiple || value % multiple != 0)
    out.push_back(cat("The ", name, " must be a multiple of ", multiple, " and at least ", multiple,
                      " pixels, got ", value, "."));
}

// The frame count asked for before rounding, or nothing when the request's --frames/--seconds is itself invalid.
std::optional<int64_t> requested_frames(const GenerationRequest& r, std::vector<std::string>* out) {
  if (r.frames && r.seconds) {
    if (out) out->push_back("--frames and --seconds are mutually exclusive; give at most one of them.");
    return std::nullopt;
  }
  if (r.seconds) {
    const double s = *r.seconds;
    const double frames = s * static_cast<double>(kFps);
    if (!std::isfinite(s) || !(frames >= 0.5 && frames < static_cast<double>(kMaxFrames) + 0.5)) {
      if (out)
        out->push_back(cat("--seconds must give between 1 and ", kMaxFrames, " frames at ", kFps, " fps (",
                           seconds_str(0.5 / kFps), " to ", seconds_str(frames_to_seconds(kMaxFrames)),
                           " s), got ", s, "."));
      return std::nullopt;
    }
    return static_cast<int64_t>(std::llround(frames));
  }
  const int64_t frames = r.frames.value_or(kDefaultFrames);
  if (frames < 1 || frames > kMaxFrames) {
    if (out)
      out->push_back(cat("--frames must be between 1 and ", kMaxFrames, " (it is rounded up to the next 17·n + 5, ",
                         kMinFrames, "..", kMaxFrames, " frames = up to ", seconds_str(frames_to_seconds(kMaxFrames)),
                         " s at ", kFps, " fps), got ", frames, "."));
    return std::nullopt;
  }
  return frames;
}

// fl2va without either canvas side: the canvas follows the first keyframe (resolved by the engine from its header).
bool canvas_follows_keyframe(const GenerationRequest& r) {
  return r.workflow() == Workflow::FL2VA && !r.width && !r.height;
}

// The rules of the reference list that need no media (spec/sampling.md §7; the reference's MiniMaxH3Ref2VASetupStep).
void reference_problems(const GenerationRequest& r, std::vector<std::string>& out) {
  using K = ReferenceInput::Kind;
  int64_t images = 0, videos = 0, audios = 0;
  bool sound = false;
  for (const ReferenceInput& ref : r.references) {
    images += ref.kind == K::Image;
    videos += ref.kind == K::Video;
    audios += ref.kind == K::Audio;
    sound = sound || ref.kind == K::Audio || (ref.kind == K::Video && ref.soundtrack != ReferenceInput::Soundtrack::None);
    if (!ref.in_memory()) {
      if (ref.path.empty()) out.push_back("A reference needs a file path or media in memory.");
      if (ref.kind == K::Video && ref.soundtrack == ReferenceInput::Soundtrack::Replaced && ref.soundtrack_path.empty())
        out.push_back("A video reference with a replaced soundtrack needs the soundtrack's file path.");
      continue;
    }
    const bool fits = ref.path.empty() && ref.soundtrack_path.empty() &&
                      (ref.kind == K::Image   ? ref.image && !ref.video && !ref.audio
                       : ref.kind == K::Video ? ref.video && !ref.image &&
                                                    (ref.soundtrack == ReferenceInput::Soundtrack::None) == !ref.audio
                                              : ref.audio && !ref.image && !ref.video);
    if (!fits)
      out.push_back("An in-memory reference holds a picture (an image), frames and, unless silent, a waveform (a "
                    "video), or a waveform (audio), and no file path.");
  }
  const std::pair<const char*, std::pair<int64_t, int64_t>> limits[] = {
      {"image", {images, kMaxImageReferences}}, {"video", {videos, kMaxVideoReferences}},
      {"audio", {audios, kMaxAudioReferences}}};
  for (const auto& [kind, count] : limits)
    if (count.first > count.second)
      out.push_back(cat("A request takes at most ", count.second, " ", kind, " references, got ", count.first, "."));
  if (static_cast<int64_t>(r.references.size()) > kMaxReferences)
    out.push_back(cat("A request takes at most ", kMaxReferences, " references in all, got ", r.references.size(), "."));
  if (audios > 0 && images + videos == 0)
    out.push_back("An audio reference needs an image or video reference beside it (--ref-image, --ref-video).");
  const std::optional<int64_t> frames = requested_frames(r, nullptr);
  if (sound && frames && align_frame_count(*frames) < kMinFramesWithReferenceAudio)
    out.push_back(cat("With reference sound (--ref-audio, or a video's soundtrack) the video needs at least ",
                      kMinFramesWithReferenceAudio, " frames (", seconds_str(frames_to_seconds(kMinFramesWithReferenceAudio)),
                      " s) to keep 2 s of it, got ", align_frame_count(*frames), " frames."));
}

}  // namespace

std::vector<std::string> request_problems(const GenerationRequest& r, int64_t canvas_multiple, RequestCheck scope,
                                          int64_t transformer_blocks, int64_t default_steps) {
  std::vector<std::string> out;
  if (r.has_keyframes() && !r.references.empty()) out.push_back(kKeyframesWithReferencesRule);
  reference_problems(r, out);
  for (const std::optional<ImageInput>* k : {&r.first_frame, &r.last_frame})
    if (*k && (*k)->is_file() == (*k)->path.empty())
      out.push_back("A keyframe is a file path or an RGB8 picture, not both or neither.");
  bool blank = true;
  for (char c : r.prompt) blank = blank && (c == ' ' || c == '\t' || c == '\n' || c == '\r');
  if (blank && scope == RequestCheck::Whole) out.push_back("The prompt must not be empty.");
  // fl2va's canvas follows its first keyframe unless both sides are given (the reference's rule); the engine
  // resolves it from the keyframe's header (Engine::validate).
  const bool keyframe_canvas = canvas_follows_keyframe(r);
  if (r.workflow() == Workflow::FL2VA && r.width.has_value() != r.height.has_value())
    out.push_back(
        "With keyframes, give --width and --height together or neither (the canvas then follows the first "
        "keyframe's aspect ratio).");
  const int64_t width = r.width.value_or(kDefaultWidth), height = r.height.value_or(kDefaultHeight);
  if (!keyframe_canvas) {
    check_side("width", width, canvas_multiple, out);
    check_side("height", height, canvas_multiple, out);
    if (width > 0 && height > 0 && width > kMaxCanvasArea / height)
      out.push_back(cat("The canvas must have at most 768 × 1344 = ", kMaxCanvasArea, " pixels, got ", width, " × ",
                        height, "."));
  }
  requested_frames(r, &out);
  const int64_t steps = r.steps.value_or(default_steps);
  const bool steps_ok = steps >= kMinSteps && steps <= kMaxSteps;
  if (!steps_ok)
    out.push_back(cat("--steps (model passes) must be between ", kMinSteps, " and ", kMaxSteps, ", got ", steps,
                      "."));
  if (r.layers && (*r.layers < min_dit_layers(transformer_blocks) || *r.layers > transformer_blocks))
    out.push_back(cat("--layers must be between ", min_dit_layers(transformer_blocks), " and ", transformer_blocks,
                      " (seven tenths of the transformer's ", transformer_blocks,
                      " blocks, rounded up, to all of them), got ", *r.layers, "."));
  if (r.core_reuse < 1 || r.core_reuse > kMaxCoreReuse)
    out.push_back(cat("--core-reuse must be between 1 and ", kMaxCoreReuse, ", got ", r.core_reuse, "."));
  // Speed controls. A keyframe canvas is compared with the render canvas once the engine has resolved it.
  if (r.reuse < kMinReuse || r.reuse > kMaxReuse) {
    out.push_back(cat("--reuse must be between ", kMinReuse, " and ", kMaxReuse,
                      " (1 evaluates the model at every pass), got ", r.reuse, "."));
  } else if (steps_ok) {
    try {
      evaluated_passes(steps, r.reuse);  // H3_REUSE_STEPS, when set
    } catch (const Error& e) {
      out.push_back(e.what());
    }
  }
  for (std::string& p : render_canvas_problems(r, keyframe_canvas ? 0 : width, keyframe_canvas ? 0 : height,
                                               canvas_multiple))
    out.push_back(std::move(p));
  if (r.core_reuse > 1 && r.reuse > 1)
    out.push_back("--core-reuse and --reuse cannot be combined: give at most one of them above 1.");
  // FastH3: the checkpoint-dependent rules (a dense checkpoint routes nothing) are Engine::validate's.
  if (r.sparsity && !(*r.sparsity >= 0.0 && *r.sparsity < 1.0))
    out.push_back(cat("--sparsity must be in [0, 1) (the fraction of video key tiles each video query tile skips), ",
                      "got ", *r.sparsity, "."));
  if (r.sparsity && r.attention == AttentionChoice::Dense)
    out.push_back("--sparsity needs the sparse attention, but --attention dense was given.");
  if (r.token_reduction && r.attention == AttentionChoice::Sparse)
    out.push_back("--token-reduction and --attention sparse cannot be combined: the sparse attention tiles the "
                  "generated video's full grid.");
  return out;
}

std::vector<std::string> render_canvas_problems(const GenerationRequest& r, int64_t width, int64_t height,
                                                int64_t canvas_multiple) {
  std::vector<std::string> out;
  if (!r.render_width && !r.render_height) return out;
  if (!r.render_width || !r.render_height) {
    out.push_back("--render-width and --render-height go together: give both or neither (the model then runs on "
                  "the output canvas).");
    return out;
  }
  const int64_t rw = *r.render_width, rh = *r.render_height;
  check_side("render width", rw, canvas_multiple, out);
  check_side("render height", rh, canvas_multiple, out);
  if (!out.empty() || width <= 0 || height <= 0) return out;
  if (rw > width || rh > height)
    out.push_back(cat("The render canvas (--render-width × --render-height) must not be larger than the output "
                      "canvas ", width, "x", height, ", got ", rw, "x", rh, "."));
  else if (rw * height != rh * width)
    out.push_back(cat("The render canvas (--render-width × --render-height) must have the output canvas' aspect "
                      "ratio (", width, "x", height, "), got ", rw, "x", rh, "."));
  return out;
}

double ResolvedRequest::spatial_rope_scale() const {
  return !request.use_reference_rope && render_width == kHalvedRopeCanvas && render_height == kHalvedRopeCanvas ? 0.5
                                                                                                               : 1.0;
}

const char* attention_choice_name(AttentionChoice a) { return a == AttentionChoice::Dense ? "dense" : "sparse"; }

std::string describe_speed_controls(const ResolvedRequest& r) {
  std::vector<std::string> parts;
  if (r.request.reuse > 1)
    parts.push_back(cat("reuse ", r.request.reuse, ": ", r.evaluated_passes, " of ", r.steps,
                        " passes evaluate the model"));
  if (r.renders_smaller())
    parts.push_back(cat("rendered at ", r.render_width, "x", r.render_height, ", upscaled to ", r.width, "x",
                        r.height, " (lanczos)"));
  if (r.request.layers) parts.push_back(cat("layers ", *r.request.layers));
  if (r.request.core_reuse > 1) parts.push_back(cat("core-reuse ", r.request.core_reuse));
  if (r.request.token_reduction) parts.push_back("token reduction");
  if (!r.attention_plan.empty()) parts.push_back(r.attention_plan);
  if (r.spatial_rope_scale() != 1.0)
    parts.push_back(cat("spatial RoPE halved on the ", kHalvedRopeCanvas, "x", kHalvedRopeCanvas,
                        " canvas (--use-reference-rope keeps the released one)"));
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string few_passes_reuse_warning(const ResolvedRequest& r) {
  const int64_t reuse = r.request.reuse;
  if (reuse <= 1 || r.steps >= kFewPassesForReuse) return {};
  return cat("--reuse ", reuse, " with only ", r.steps, " passes leaves very few fresh model evaluations; keep "
             "--reuse 1 below ", kFewPassesForReuse, " passes.");
}

std::vector<NamedPath> request_input_files(const GenerationRequest& r) {
  using K = ReferenceInput::Kind;
  using S = ReferenceInput::Soundtrack;
  std::vector<NamedPath> out;
  for (const auto& [flag, k] : {std::pair{"--first-frame", &r.first_frame}, std::pair{"--last-frame", &r.last_frame}})
    if (*k && (*k)->is_file()) out.push_back({flag, (*k)->path});
  for (const ReferenceInput& ref : r.references) {
    if (ref.in_memory()) continue;
    const char* flag = ref.kind == K::Image      ? "--ref-image"
                       : ref.kind == K::Audio    ? "--ref-audio"
                       : ref.soundtrack == S::Own  ? "--ref-video"
                       : ref.soundtrack == S::None ? "--ref-silent-video"
                                                   : "--ref-video-audio";
    out.push_back({flag, ref.path});
    if (ref.kind == K::Video && ref.soundtrack == S::Replaced) out.push_back({flag, ref.soundtrack_path});
  }
  return out;
}

void throw_if_problems(const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string msg;
  for (const std::string& p : problems) msg += (msg.empty() ? "" : "\n") + p;
  throw Error(msg);
}

ResolvedRequest validate_request(const GenerationRequest& r, int64_t canvas_multiple, RequestCheck scope,
                                 int64_t transformer_blocks, int64_t default_steps) {
  throw_if_problems(request_problems(r, canvas_multiple, scope, transformer_blocks, default_steps));
  ResolvedRequest out;
  out.request = r;
  out.workflow = r.workflow();
  // A keyframe canvas (both sides absent) is resolved by the engine from the keyframe; 0 until then.
  const bool keyframe_canvas = canvas_follows_keyframe(r);
  out.width = keyframe_canvas ? 0 : r.width.value_or(kDefaultWidth);
  out.height = keyframe_canvas ? 0 : r.height.value_or(kDefaultHeight);
  // A keyframe canvas' render canvas is resolved with it (Engine::validate).
  out.render_width = r.render_width.value_or(out.width);
  out.render_height = r.render_height.value_or(out.height);
  out.steps = r.steps.value_or(default_steps);
  out.evaluated_passes = count_evaluated(evaluated_passes(out.steps, r.reuse));
  out.requested_frames = *requested_frames(r, nullptr);
  out.frames = align_frame_count(out.requested_frames);
  const std::string aligned = cat(out.frames, " frames (the video VAE needs 17·n + 5 frames), ",
                                  seconds_str(frames_to_seconds(out.frames)), " s at ", kFps, " fps");
  if (r.seconds && out.frames == out.requested_frames)
    out.frames_note = cat("--seconds ", *r.seconds, " = ", out.frames, " frames, ",
                          seconds_str(frames_to_seconds(out.frames)), " s at ", kFps, " fps");
  else if (r.seconds)
    out.frames_note = cat("--seconds ", *r.seconds, " = ", out.requested_frames, " frames, rounded up to ", aligned);
  else if (out.frames != out.requested_frames)
    out.frames_note = cat("--frames ", out.requested_frames, " rounded up to ", aligned);
  return out;
}

}  // namespace h3

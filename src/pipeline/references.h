// The references of a ref2va request as the reference's MiniMaxH3Ref2VASetupStep (before_encoder.py) puts them
// onto MiniMax-H3's own rates and resolutions (spec/sampling.md §4, spec/packing.md §6.4): checked from their
// headers before any model loads (check_reference_media), then decoded and normalized in request order
// (normalize_references) — an image resized to its own canvas, a video decoded at 24 fps onto the canvas its own
// aspect resolves to, a soundtrack or an audio file brought to the audio VAE's rate as stereo and cut to the
// generated duration.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/config.h"
#include "media/audio_input.h"
#include "media/video_frames.h"
#include "pipeline/keyframes.h"
#include "pipeline/memory_plan.h"
#include "pipeline/request.h"
#include "models/qwen3vl/image_processor.h"
#include "text/prompt.h"

namespace h3 {

// The rate the conditioner reads a reference video at (the reference's MiniMaxH3Ref2VATextEncoderStep
// video_sample_fps, a constant of its blocks, not of the snapshot).
inline constexpr double kVideoConditionSampleFps = 2.0;
// h3.c's audio limits (its README): every audio input — a file or a video's soundtrack — keeps at least 2 s once
// cut to the generated duration, and all of them together at most 15 s.
inline constexpr double kMinReferenceAudioSeconds = 2.0;
inline constexpr double kMaxReferenceAudioSecondsInAll = 15.0;

// What sizes a request's references: the model's canvas multiple (VAE ratio × patch), the snapshot's canvas rule
// (the video canvas and reference_image_short_edge), the audio VAE's rate, the conditioner's temporal patch.
struct ReferenceRules {
  int64_t canvas_multiple = 32;
  CanvasConfig canvas;
  int audio_rate = kReferenceAudioRate;
  int64_t temporal_patch = 2;
};

// The canvas an image reference of width × height pixels is encoded at (before_encoder.py
// MiniMaxH3Ref2VASetupStep). `Max` (the reference's rule): the short edge scaled to `short_edge`, upscaling
// included, no area cap. `Match` (h3.c's h3_reference_image_canvas with no short-edge cap): down only, to the
// target canvas' area. Either way both sides round to the nearest multiple (ties to even) and are at least one.
CanvasSize reference_image_canvas(int64_t width, int64_t height, ReferenceImageSize mode, int64_t short_edge,
                                  int64_t target_width, int64_t target_height, int64_t multiple);

// Every reference's file checked from its header (no frame decoded), one sentence per problem naming the file and
// the rule: unreadable or corrupt media, an image outside 1:4 .. 4:1, a video without a video stream or too short
// for the conditioner's 2 fps reading, an audio input without an audio stream or shorter than 2 s, more than 15 s
// of reference audio in all. `frames` is the request's aligned frame count.
std::vector<std::string> reference_media_problems(const GenerationRequest& request, int64_t frames,
                                                  const ReferenceRules& rules);

// What each reference will weigh, from its file's header (for the memory plan, before anything is decoded): the
// canvas it is encoded at, its 24 fps frames (from the container's duration, the request's when unknown), its
// sound's samples at the VAE rate.
std::vector<ReferenceFootprint> reference_footprints(const GenerationRequest& request, int64_t frames,
                                                     int64_t target_width, int64_t target_height,
                                                     const ReferenceRules& rules, const VideoVaeConfig& vae);

// One reference after the setup step. An image file is read as diffusers' load_image reads it (EXIF orientation
// applied: media/image_input.h read_image_file_upright), unlike an fl2va keyframe.
struct NormalizedReference {
  ReferenceInput::Kind kind = ReferenceInput::Kind::Image;
  std::string source;              // the file, for messages
  Rgb8Image image;                 // Image: on its reference_image_canvas
  Rgb8Video frames;                // Video: 24 fps, at most `frames` frames, on its own canvas
  std::optional<Waveform> audio;   // Audio, and a video's soundtrack: stereo at the VAE rate, cut to the duration
  bool has_audio() const { return audio.has_value(); }
};

// The references of `request` decoded and normalized in request order, for a generation of `frames` frames on a
// target_width × target_height canvas. Throws the sentence of the rule a file breaks once decoded.
std::vector<NormalizedReference> normalize_references(const GenerationRequest& request, int64_t frames,
                                                      int64_t target_width, int64_t target_height,
                                                      const ReferenceRules& rules);

// A normalized sound as the audio VAE encoder takes it: [channels, samples] host F32.
Tensor waveform_tensor(const Waveform& w);

// ref2va's conditioner inputs (encoders.py MiniMaxH3Ref2VATextEncoderStep._gather_vision_features): the image
// references through the image processor and the video references' kVideoConditionSampleFps readings through the
// video processor — one batch per modality, each for one tower call — and every reference as the presentation sees
// it (present_ref2va), in request order. `video_processor` may be null when there is no video reference.
struct ReferenceVisionInputs {
  std::optional<QwenVisionInputs> images, videos;
  std::vector<Ref2vaReference> presented;
};
ReferenceVisionInputs reference_vision_inputs(const std::vector<NormalizedReference>& refs,
                                              const ImageProcessorConfig& image_processor,
                                              const VideoProcessorConfig* video_processor, int64_t temporal_patch);

// The frames of a video reference the VAE encodes (encoders.py MiniMaxH3Ref2VAReferenceEncoderStep): its count
// snapped DOWN to clip·n + tokens (clip = the VAE's clip_length, tokens = its latent tokens per clip), at least one
// clip; a shorter reference is encoded whole (the encoder pads it).
int64_t reference_video_encode_frames(int64_t frames, int64_t clip_length, int64_t tokens_per_clip);
// The first reference_video_encode_frames of `video`, for a VAE of this configuration.
Rgb8Video reference_video_encode_clip(const Rgb8Video& video, const VideoVaeConfig& vae);

}  // namespace h3

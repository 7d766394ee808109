// The Qwen3-VL video path before the vision tower (spec/conditioner.md §3.4, §5.3; packing.md §3): which frames of a
// reference video the conditioner reads and how they are labelled (MiniMax-H3's ref2va text-encoder step,
// encoders.py `MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames`), and transformers 5.17's
// Qwen3VLVideoProcessor (its torchvision backend, what Qwen3VLProcessor.from_pretrained loads; called with
// do_sample_frames=False, as MiniMax-H3 samples the frames itself), which turns 8-bit RGB clips into the tower's
// patch rows.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "io/config.h"
#include "io/snapshot.h"
#include "media/video_frames.h"
#include "models/qwen3vl/image_processor.h"

namespace h3 {

// The frames the conditioner reads of one normalized reference video and the timestamp of each vision block.
struct VideoConditionFrames {
  std::vector<int64_t> indices;          // into the video, increasing
  std::vector<double> block_timestamps;  // seconds, one per group of temporal_patch sampled frames
};

// A video of `num_frames` frames at `fps` read at `sample_fps` (spec/conditioner.md §3.4): a cursor advancing by
// fps / sample_fps picks frame round(cursor) (Python's round: half to even) while it is inside the video, skipping a
// frame it picked already; the k-th picked frame is at k / sample_fps seconds; the list is padded to a multiple of
// temporal_patch by repeating its last timestamp; each group's timestamp is the mean of its first and last. Throws
// the reference's sentence when fewer than temporal_patch frames are picked, and for a non-positive rate or patch.
VideoConditionFrames sample_video_condition_frames(int64_t num_frames, double fps, double sample_fps,
                                                   int64_t temporal_patch);

// The frames of `video` at `indices` (each in [0, video.frames)), in that order.
Rgb8Video select_frames(const Rgb8Video& video, const std::vector<int64_t>& indices);

// The processor/ component's video-processor settings, found as transformers 5.17 finds them: the "video_processor"
// object of processor_config.json first, else video_preprocessor_config.json. Throws when the folder has neither
// (transformers would then build a Qwen2VLVideoProcessor out of the image processor's preprocessor_config.json, which
// h3 does not implement).
VideoProcessorConfig load_video_processor_config(const Component& processor);

// transformers' Qwen3-VL video smart_resize: the (height, width) every frame of a clip of num_frames frames of
// height × width pixels is resized to. A side under `factor` first scales both sides up (truncated to integers) until
// it reaches `factor`; then both sides are rounded to multiples of `factor` and, with t' = num_frames rounded to a
// multiple of temporal_factor, t'·h'·w' is brought into [min_pixels, max_pixels]. Python's arithmetic (round half to
// even, float division). Throws for fewer than temporal_factor frames, an empty frame or an aspect ratio above 200.
std::pair<int64_t, int64_t> video_smart_resize(int64_t num_frames, int64_t height, int64_t width,
                                               int64_t temporal_factor, int64_t factor, int64_t min_pixels,
                                               int64_t max_pixels);

// The max_pixels smart_resize gets for a clip of num_frames frames: size.longest_edge, or with cap_pixels_per_frame
// max(min(max_video_tokens · factor², longest_edge // num_frames), int(shortest_edge · 1.05)) · num_frames.
int64_t video_max_pixels(const VideoProcessorConfig& config, int64_t num_frames);

// Every clip's frames resized to its video_smart_resize size (torchvision's antialiased bicubic on 8 bits,
// media/torch_resize.h; untouched when the size is already right), normalized in float32 like the image processor
// (the fused constants, patch_rows.h), padded to a multiple of temporal_patch_size frames by repeating the last
// frame, and cut into patch rows, clip after clip: pixel_values_videos, with video_grid_thw
// (frames' / temporal_patch_size, h' / patch, w' / patch) per clip. Equal to the reference's bit for bit. Throws for
// an empty list or a clip that is empty or misshapen.
QwenVisionInputs prepare_videos(const VideoProcessorConfig& config, const std::vector<Rgb8Video>& videos);

}  // namespace h3

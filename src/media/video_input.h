// Video references of the ref2va workflow (spec/sampling.md §4, spec/packing.md §3): a file's frames as the
// reference decodes them (references.py MiniMaxH3VideoReference.from_file, _decode_video_file), then the
// reference's normalization onto 24 fps and onto the canvas of the video's own aspect (before_encoder.py
// MiniMaxH3Ref2VASetupStep._normalize_video_condition).
//
// Decoding. The reference decodes with PyAV; h3 calls the same FFmpeg libraries directly: the first video stream (in
// the container's order), FFmpeg's decoder for it, every frame it delivers, converted to RGB24 by swscale at the
// decoded size with SWS_BILINEAR and no other flag — what PyAV's VideoFrame.to_ndarray(format="rgb24") asks for
// (its reformatter's default interpolation; swscale's unscaled YUV->RGB converter ignores the scaler kind, so the
// ffmpeg command line's bicubic default converts the same). The YUV matrix and range are the frame's own tags (an
// untagged frame: BT.601, limited range unless its pixel format is a full-range yuvj one), which is what PyAV >= 17
// (sws_scale_frame) and the ffmpeg command line do; PyAV 14 to 16 ignore the tags and use those untagged defaults
// for every frame, so for a stream tagged BT.709 or full range they give other pixels.
// What h3 promises: on the same FFmpeg build, the bytes of the reference's decode (tests/fixtures/media, made with
// the reference's _decode_video_file on PyAV 10 over this machine's FFmpeg 5.1: H.264, MPEG-4 part 2, VP9; the
// tagged clip against the ffmpeg command line). Across FFmpeg versions the decoders of the exact codecs (H.264,
// VP9, ...) still agree, but swscale's YUV->RGB rounding may move by one level.
//
// Rotation. The display matrix of the first decoded frame, else the stream's (where PyAV >= 14.1 on FFmpeg >= 7
// finds it on every frame; the reference keeps the last frame's, the same for every stream whose matrix does not
// change), turned as the reference turns it: int(av_display_rotation_get) truncated, round(angle / 90) (ties to
// even) mod 4 = k, np.rot90(frames, -k): k quarter turns clockwise. NOTE: that is the opposite direction from
// FFmpeg's own autorotate for a quarter turn (the ffmpeg command line shows those frames a half turn away; a half
// turn agrees), since the reference undoes the counterclockwise angle where FFmpeg applies it. h3 follows the
// reference. A non-square sample aspect ratio is ignored, as in the reference.
//
// Bounded decoding. Nothing past the source frames a request can use is decoded: for `num_frames` frames at 24 fps,
// source frames 0 .. n-1 with n the first whose 24 fps slot reaches num_frames (source_frames_needed). A two-hour
// file costs what its first seconds cost, in time and in memory; read_reference_video also holds canvas-sized
// frames only, never the decoded size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "media/media_source.h"
#include "media/video_frames.h"

namespace h3 {

// The most pixels a decoded frame may have (8192 x 8192): an RGB24 copy of one is 192 MiB.
inline constexpr int64_t kMaxVideoFramePixels = int64_t{8192} * 8192;

// What a cheap look at the container says (avformat_find_stream_info reads a few seconds at most; no frame is
// converted): for validating a request before any model loads.
struct VideoProbe {
  int width = 0, height = 0;                // as the frames come out: the rotation applied
  int coded_width = 0, coded_height = 0;    // as stored
  int clockwise_quarter_turns = 0;          // 0..3, from the stream's display matrix
  double fps = 0;                           // float(stream.average_rate or stream.guessed_rate)
  int fps_num = 0, fps_den = 1;             // the same rate as the container's fraction
  double duration_seconds = -1;             // the container's (or the stream's) duration; -1 when unknown
  bool has_audio = false;                   // an audio stream is present (the video's own soundtrack)
  std::string codec;                        // FFmpeg's codec name, e.g. "h264"
};

// Throws h3::Error, one sentence naming the source: missing, not a regular file, empty, not a media format FFmpeg
// reads, corrupt stream info, no video stream, no frame size or more than kMaxVideoFramePixels, no frame rate, a
// display matrix that is not a rotation.
VideoProbe probe_video(const MediaSource& source);

// DecodedVideo (include/h3/media.h): the frames rotated as above, with the rate they carry (VideoProbe::fps).
// The first `max_frames` frames (all of them when the stream holds fewer) at the decoded size and native rate.
// Every probe_video rule, then: a stream that holds no frame, whose frames pass kMaxVideoFramePixels or change
// size, or whose packets FFmpeg cannot demux or decode is refused. Memory: max_frames decoded frames.
DecodedVideo read_video(const MediaSource& source, int64_t max_frames);

// --- the reference's normalization (before_encoder.py _normalize_video_condition) ---------------------------------

// Source frame i's first slot on the target grid: floor(i · target_fps / fps + 0.5) in float64, as the reference's
// np.floor(np.arange(n) * scale + 0.5); the end of a stream of n frames is slot n (its math.floor(n·scale + 0.5)).
int64_t fps_slot(int64_t i, double fps, double target_fps);
// How many times each of `frames` source frames is shown at target_fps: slot(i + 1) − slot(i) (zero drops it); all
// ones when fps == target_fps, as the reference leaves those frames alone.
std::vector<int64_t> fps_repeats(int64_t frames, double fps, double target_fps);
// How many source frames the first `num_frames` target frames come from: the least n with slot(n) ≥ num_frames.
int64_t source_frames_needed(int64_t num_frames, double fps, double target_fps = kVideoFps);

// np.repeat(frames, fps_repeats(...)): whole frames dropped and duplicated onto target_fps.
Rgb8Video resample_to_fps(const Rgb8Video& frames, double fps, double target_fps = kVideoFps);

// _normalize_video_condition: resample_to_fps, then the first `num_frames` frames, then each one put on
// canvas_width x canvas_height with Pillow's LANCZOS (media/image_resize.h) unless it already has that size. The
// canvas is resolve_canvas_size of the frames' own width and height with the target's canvas rule
// (pipeline/keyframes.h), which the caller computes. Refuses a non-positive fps and a result with no frame.
Rgb8Video normalize_reference_video(const Rgb8Video& frames, double fps, int64_t num_frames, int canvas_width,
                                    int canvas_height, double target_fps = kVideoFps);

// read_video + normalize_reference_video in one pass: decodes source_frames_needed(num_frames, fps) frames at most,
// converts and resizes only the frames that are shown, and holds only canvas-sized frames. The same bytes as
// normalize_reference_video(read_video(source, <all>).frames, fps, ...).
Rgb8Video read_reference_video(const MediaSource& source, int64_t num_frames, int canvas_width, int canvas_height,
                               double target_fps = kVideoFps);

// `copies` copies of `image` appended to `video` (which takes its size when empty).
void append_frame(Rgb8Video& video, const Rgb8Image& image, int64_t copies = 1);

// np.rot90(image, -quarter_turns): `quarter_turns` (any integer) quarter turns clockwise.
Rgb8Image rotate_clockwise(const Rgb8Image& image, int quarter_turns);

}  // namespace h3

// MP4 output through FFmpeg's libraries: H.264 (libx264, yuv420p, BT.709 limited range, tagged) and AAC
// (FFmpeg's native encoder, stereo), muxed with +faststart (index at the front, for progressive playback).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "media/video_frames.h"

namespace h3 {

class OutputFile;

// The audio rate of the model's soundtrack (samples per second per channel).
inline constexpr int kAudioSampleRate = 32000;

struct Mp4Options {
  int fps = kVideoFps;                    // frames per second (integer), time base 1/fps
  std::string video_encoder = "libx264";  // an FFmpeg H.264 encoder name
  int crf = 18;                           // x264 constant rate factor, 0..51 (lower = better, larger)
  std::string preset = "medium";          // x264 preset (ultrafast ... placebo)
  int threads = 0;                        // encoder threads, 0 = one per core
  int audio_sample_rate = kAudioSampleRate;
  int audio_bitrate = 192000;             // AAC bit rate in bit/s
  // Cut the soundtrack to the video's length, round(F · rate / fps) samples (the model's audio runs up to
  // 8.3 ms longer than the video, spec/audio_vae.md §6.1). Shorter audio is never padded.
  bool trim_audio_to_video = true;
  // Container metadata (key, value), UTF-8: what ffprobe lists as the format's tags. Written with the muxer's
  // movflags use_metadata_tags, which keeps every key (without it the MP4 muxer drops all but iTunes' names).
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Why an MP4 goes to a regular file only, never into a FIFO or a device: FFmpeg's MP4 muxer refuses an output it
// cannot seek in ("muxer does not support non seekable output"; only fragmented MP4 streams), and +faststart
// reads the file back to move the index to the front.
inline constexpr const char* kMp4NeedsAFile =
    "an MP4 cannot be streamed: the muxer goes back to write its index at the front, so it needs a regular file";

// Number of audio samples that span `frames` video frames: round(frames · rate / fps).
int64_t audio_samples_for_frames(int frames, int fps, int sample_rate);

// Writes `video` and the planar stereo soundtrack `audio` (channel 0: audio[0, S), channel 1: audio[S, 2S),
// floats in [-1, 1], S = `samples`) to an MP4 at `path`. With samples == 0 (audio may be null) the file has
// a video stream only. Width and height must be even (yuv420p halves the chroma planes): odd sizes are
// rejected before any work, not padded. The file is written to "<path>.partial-<pid>" and renamed into
// place only when complete (util/output_file.h); on any failure nothing is left at `path` or at the temporary
// name, and the h3::Error names the step and FFmpeg's message. A FIFO or a device at `path` is refused
// (kMp4NeedsAFile).
void write_mp4(const std::string& path, const Rgb8Video& video, const float* audio, int64_t samples,
               const Mp4Options& options = {});
// The same into `out` (a staged file, util/output_file.h), finished but not committed: the caller publishes it. The
// current cancel flag (util/cancel.h) is checked between frames and packets.
void write_mp4(OutputFile& out, const Rgb8Video& video, const float* audio, int64_t samples,
               const Mp4Options& options = {});

}  // namespace h3

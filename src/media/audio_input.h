// Audio references of the ref2va workflow and the soundtracks of video references (spec/audio_vae.md §6.2,
// spec/sampling.md §4): a file decoded as the reference decodes it (references.py _decode_reference_soundtrack,
// MiniMaxH3AudioReference.from_file), then the reference's normalization (before_encoder.py
// MiniMaxH3Ref2VASetupStep._normalize_audio_condition): truncation at the native rate to the generated duration,
// mono repeated onto two channels, one torchaudio.transforms.Resample(rate, 32000) pass.
//
// Decoding: the first audio stream (in the container's order) through FFmpeg's decoder, converted to planar float32
// by libswresample at the stream's own rate and channel layout (a format change only: PCM s16/s32/u8 scale exactly,
// float formats are copied), which is what PyAV's AudioResampler(format="fltp", layout=stream.layout,
// rate=stream.codec_context.sample_rate) does; the same FFmpeg build gives the reference's samples bit for bit
// (tests/fixtures/media: WAV s16/u8/f32, FLAC s32, MP3, AAC, Opus). Bounded: decoding stops once the samples a
// request can use are in; a two-hour file costs what its first seconds cost.
//
// Resampling: a port of torchaudio's _get_sinc_resample_kernel and _apply_sinc_resample_kernel with the defaults
// (sinc_interp_hann, lowpass_filter_width 6, rolloff 0.99), hand-written because no Debian library computes that
// kernel: gcd reduction, the kernel in float64 as torch evaluates it (the phase term j/b rounded to float32 first, as
// torch's integer arange / int division makes it) then rounded to float32, the zero padding of W left and W + a
// right, the stride-a convolution, the interleaving of the b phases and torch's output length
// ceil(float32(b·N/a)) (torch.as_tensor of the Python float is float32, so a length just above an integer rounds
// down to it). The sums run in float64 (torch's conv1d sums float32 in an order of its own): within 2e-7 rel L2 of
// torchaudio's float32 output on the fixtures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "h3/media.h"
#include "media/media_source.h"

namespace h3 {

// The audio VAE's sample rate, which every reference waveform is resampled to.
inline constexpr int kReferenceAudioRate = 32000;

// Waveform (planar float32 samples) is public (include/h3/media.h).

struct AudioProbe {
  int sample_rate = 0;
  int channels = 0;
  double duration_seconds = -1;  // the container's (or the stream's) duration; -1 when unknown
  std::string codec;             // FFmpeg's codec name, e.g. "aac"
};

// The first audio stream's rate, channels and duration from the container (a few seconds are read at most). Throws
// h3::Error, one sentence naming the source: missing, not a regular file, empty, not a media format FFmpeg reads,
// corrupt stream info, no audio stream, no sample rate, more than two channels, a rate whose resampling kernel to
// kReferenceAudioRate would pass kMaxResampleKernelTaps.
AudioProbe probe_audio(const MediaSource& source);

// Which of the reference's decoders a file goes through. An audio reference (_decode_audio_file) reads the audio
// stream from the container's start. A video reference's soundtrack (_decode_video_file) is read in a second pass
// after container.seek(0) (av_seek_frame(-1, 0, AVSEEK_FLAG_BACKWARD)), which for some containers does not land on
// the first audio packet: on the Matroska/WebM fixtures the soundtrack starts one packet (an MP3 or Opus frame) in.
// h3 seeks the same way, so it gives the reference's samples there too.
enum class AudioRole { AudioReference, VideoSoundtrack };

// How much of a file to decode, in seconds at its own rate, and as what.
struct AudioReadOptions {
  double max_seconds = 0;  // keep int(max_seconds · rate) samples, the reference's truncation; decoding stops there
  double min_seconds = 0;  // refuse a stream shorter than this (0: any length of at least one sample)
  AudioRole role = AudioRole::AudioReference;
};

// The first audio stream decoded to planar float32 at its own rate and channels (1 or 2), truncated as `options`
// says. Every probe_audio rule, then: no samples, shorter than options.min_seconds, a rate or channel count that
// changes mid-stream, packets FFmpeg cannot demux or decode, a soundtrack that cannot be seeked to its start.
Waveform read_audio(const MediaSource& source, const AudioReadOptions& options);

// --- the reference's normalization --------------------------------------------------------------------------------

// int(num_frames / fps · sample_rate) in float64: the native-rate samples a reference keeps for num_frames frames.
int64_t reference_audio_samples(int64_t num_frames, int sample_rate, double fps = 24.0);

// The most taps a resampling kernel may have (64 MB of float32). torchaudio builds a kernel of b · (2W + a) taps,
// which two rates with a small gcd make huge (44101 Hz -> 32 kHz: 1.4 G taps); the common rates need far fewer
// (44.1 kHz: 146,880; 11.025 kHz: 582,400).
inline constexpr int64_t kMaxResampleKernelTaps = int64_t{1} << 24;

// torchaudio's resampling kernel for orig_rate -> new_rate (both > 0, different): b = new/g phases of 2W + a taps,
// a = orig/g, g = gcd. Refuses, in one sentence, a kernel of more than kMaxResampleKernelTaps taps.
struct SincResampleKernel {
  int64_t a = 0, b = 0, width = 0;
  std::vector<float> taps;  // b rows of 2W + a, row j = phase j
  int64_t taps_per_phase() const { return 2 * width + a; }
};
SincResampleKernel sinc_resample_kernel(int orig_rate, int new_rate);
// The taps of that kernel, b · (2W + a), without building it.
int64_t sinc_resample_kernel_taps(int orig_rate, int new_rate);
// torchaudio's output length for `samples` input samples: ceil(float32(b · samples / a)).
int64_t resampled_length(int64_t samples, const SincResampleKernel& kernel);
// torchaudio.transforms.Resample(waveform.sample_rate, new_rate)(waveform), every channel; the waveform itself when
// the rates are equal.
Waveform resample_waveform(const Waveform& waveform, int new_rate);

// _normalize_audio_condition(waveform, rate, target_rate, num_frames / fps): the first int(num_frames / fps · rate)
// samples, mono repeated onto two channels, resampled to target_rate. Refuses other than 1 or 2 channels.
Waveform normalize_reference_audio(const Waveform& waveform, int64_t num_frames,
                                   int target_rate = kReferenceAudioRate, double fps = 24.0);

// read_audio bounded to the request + normalize_reference_audio: the reference waveform for a request of
// `num_frames` frames, from a stream at least `min_seconds` long.
Waveform read_reference_audio(const MediaSource& source, int64_t num_frames, AudioRole role, double min_seconds = 0,
                              int target_rate = kReferenceAudioRate, double fps = 24.0);

}  // namespace h3

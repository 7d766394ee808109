#include "media/audio_input.h"

#include <algorithm>
#include <cmath>

#include "media/demuxer.h"
#include "util/error.h"
#include "util/thread_pool.h"

extern "C" {
#include <libavutil/channel_layout.h>
}

#include "util/strict_fp.h"

namespace h3 {

namespace {

using ffmpeg::Demuxer;

AVStream* audio_stream(const Demuxer& demuxer) {
  AVStream* stream = demuxer.first_stream(AVMEDIA_TYPE_AUDIO);
  if (stream == nullptr) demuxer.fail("it has no audio stream");
  const AVCodecParameters* par = stream->codecpar;
  if (par->sample_rate <= 0) demuxer.fail("its audio stream has no sample rate");
  const int channels = par->ch_layout.nb_channels;
  if (channels < 1 || channels > 2)
    demuxer.fail("it has ", channels, " audio channels; a reference soundtrack must be mono or stereo");
  if (par->sample_rate != kReferenceAudioRate &&
      sinc_resample_kernel_taps(par->sample_rate, kReferenceAudioRate) > kMaxResampleKernelTaps)
    demuxer.fail("its sample rate of ", par->sample_rate, " Hz needs a resampling kernel of ",
                 sinc_resample_kernel_taps(par->sample_rate, kReferenceAudioRate), " taps to reach ", kReferenceAudioRate,
                 " Hz, more than the ", kMaxResampleKernelTaps, " h3 allows");
  return stream;
}

double duration_seconds(const Demuxer& demuxer, const AVStream* stream) {
  if (demuxer.format()->duration > 0) return static_cast<double>(demuxer.format()->duration) / AV_TIME_BASE;
  if (stream->duration > 0) return static_cast<double>(stream->duration) * av_q2d(stream->time_base);
  return -1;
}

// Decoded frames to planar float at their own rate and layout (PyAV's AudioResampler with format="fltp" and the
// stream's layout and rate: a format conversion only).
class PlanarFloatConverter {
 public:
  explicit PlanarFloatConverter(const Demuxer& demuxer) : demuxer_(demuxer) {}
  ~PlanarFloatConverter() { swr_free(&swr_); }
  PlanarFloatConverter(const PlanarFloatConverter&) = delete;
  PlanarFloatConverter& operator=(const PlanarFloatConverter&) = delete;

  // Appends the frame's samples to `planes` (one vector per channel).
  void append(const AVFrame* frame, std::vector<std::vector<float>>& planes) {
    const int channels = static_cast<int>(planes.size());
    if (frame->ch_layout.nb_channels != channels)
      demuxer_.fail("its channel count changes from ", channels, " to ", frame->ch_layout.nb_channels, " mid-stream");
    if (frame->nb_samples <= 0) return;
    if (swr_ == nullptr) {
      format_ = frame->format;
      AVChannelLayout layout{};  // FFmpeg 5.1 takes the layouts by non-const pointer
      int rc = av_channel_layout_copy(&layout, &frame->ch_layout);
      if (rc >= 0)
        rc = swr_alloc_set_opts2(&swr_, &layout, AV_SAMPLE_FMT_FLTP, frame->sample_rate, &layout,
                                 static_cast<AVSampleFormat>(frame->format), frame->sample_rate, 0, nullptr);
      av_channel_layout_uninit(&layout);
      if (rc < 0 || swr_init(swr_) < 0) demuxer_.fail("FFmpeg cannot convert its audio samples to float");
    } else if (frame->format != format_) {
      demuxer_.fail("its sample format changes mid-stream");
    }
    std::vector<uint8_t*> out(static_cast<size_t>(channels));
    const size_t start = planes[0].size();
    for (int c = 0; c < channels; ++c) {
      planes[static_cast<size_t>(c)].resize(start + static_cast<size_t>(frame->nb_samples));
      out[static_cast<size_t>(c)] = reinterpret_cast<uint8_t*>(planes[static_cast<size_t>(c)].data() + start);
    }
    const int got = swr_convert(swr_, out.data(), frame->nb_samples,
                                const_cast<const uint8_t**>(frame->extended_data), frame->nb_samples);
    if (got != frame->nb_samples) demuxer_.fail("FFmpeg cannot convert its audio samples to float");
  }

 private:
  const Demuxer& demuxer_;
  SwrContext* swr_ = nullptr;
  int format_ = -1;
};

}  // namespace

AudioProbe probe_audio(const MediaSource& source) {
  Demuxer demuxer(source, "audio");
  AVStream* stream = audio_stream(demuxer);
  AudioProbe probe;
  probe.sample_rate = stream->codecpar->sample_rate;
  probe.channels = stream->codecpar->ch_layout.nb_channels;
  probe.duration_seconds = duration_seconds(demuxer, stream);
  probe.codec = avcodec_get_name(stream->codecpar->codec_id);
  return probe;
}

Waveform read_audio(const MediaSource& source, const AudioReadOptions& options) {
  H3_CHECK(options.max_seconds > 0 && options.min_seconds >= 0, "reading audio needs a positive duration to keep ",
           "and a minimum of at least 0 s, got ", options.max_seconds, " s and ", options.min_seconds, " s");
  Demuxer demuxer(source, "audio");
  AVStream* stream = audio_stream(demuxer);
  const int rate = stream->codecpar->sample_rate;
  const int channels = stream->codecpar->ch_layout.nb_channels;
  const auto keep = static_cast<int64_t>(options.max_seconds * rate);  // int(max_duration * sample_rate)
  const auto minimum = static_cast<int64_t>(std::ceil(options.min_seconds * rate));
  if (keep == 0)
    demuxer.fail("its sample rate of ", rate, " Hz keeps no sample of the ", options.max_seconds,
                 " s asked for; that takes at least ", static_cast<int64_t>(std::ceil(1.0 / options.max_seconds)),
                 " Hz");
  if (options.role == AudioRole::VideoSoundtrack) demuxer.seek_to_start();
  const int64_t wanted = std::max(keep, minimum);
  std::vector<std::vector<float>> planes(static_cast<size_t>(channels));
  PlanarFloatConverter converter(demuxer);
  demuxer.decode(stream, [&](AVFrame* frame) {
    if (frame->sample_rate != rate)
      demuxer.fail("its sample rate changes from ", rate, " Hz to ", frame->sample_rate, " Hz mid-stream");
    converter.append(frame, planes);
    return static_cast<int64_t>(planes[0].size()) < wanted;
  });
  const auto decoded = static_cast<int64_t>(planes[0].size());
  if (decoded == 0) demuxer.fail("it holds no audio samples");
  if (decoded < minimum)
    demuxer.fail("it is ", static_cast<double>(decoded) / rate, " s long; an audio reference must be at least ",
                 options.min_seconds, " s long");
  const int64_t kept = std::min(decoded, keep);
  Waveform out;
  out.sample_rate = rate;
  out.channels = channels;
  out.samples.reserve(static_cast<size_t>(kept * channels));
  for (const auto& plane : planes) out.samples.insert(out.samples.end(), plane.begin(), plane.begin() + kept);
  return out;
}

Waveform read_reference_audio(const MediaSource& source, int64_t num_frames, AudioRole role, double min_seconds,
                              int target_rate, double fps) {
  H3_CHECK(num_frames >= 1, "reading a reference soundtrack needs at least one frame, got ", num_frames);
  const Waveform decoded = read_audio(source, {static_cast<double>(num_frames) / fps, min_seconds, role});
  return normalize_reference_audio(decoded, num_frames, target_rate, fps);
}

}  // namespace h3

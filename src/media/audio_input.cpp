#include "media/audio_input.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

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

// torchaudio.transforms.Resample's defaults.
constexpr int kLowpassFilterWidth = 6;
constexpr double kRolloff = 0.99;

// The phases and taps of torchaudio's kernel for a -> b (before it is built).
struct KernelShape {
  int64_t a, b, width;
};
KernelShape kernel_shape(int orig_rate, int new_rate) {
  const int64_t g = std::gcd(orig_rate, new_rate);
  const int64_t a = orig_rate / g, b = new_rate / g;
  const double base = static_cast<double>(std::min(a, b)) * kRolloff;
  return {a, b, static_cast<int64_t>(std::ceil(static_cast<double>(kLowpassFilterWidth * a) / base))};
}
int64_t kernel_taps(int orig_rate, int new_rate) {
  const KernelShape k = kernel_shape(orig_rate, new_rate);
  return k.b * (2 * k.width + k.a);
}

AVStream* audio_stream(const Demuxer& demuxer) {
  AVStream* stream = demuxer.first_stream(AVMEDIA_TYPE_AUDIO);
  if (stream == nullptr) demuxer.fail("it has no audio stream");
  const AVCodecParameters* par = stream->codecpar;
  if (par->sample_rate <= 0) demuxer.fail("its audio stream has no sample rate");
  const int channels = par->ch_layout.nb_channels;
  if (channels < 1 || channels > 2)
    demuxer.fail("it has ", channels, " audio channels; a reference soundtrack must be mono or stereo");
  if (par->sample_rate != kReferenceAudioRate &&
      kernel_taps(par->sample_rate, kReferenceAudioRate) > kMaxResampleKernelTaps)
    demuxer.fail("its sample rate of ", par->sample_rate, " Hz needs a resampling kernel of ",
                 kernel_taps(par->sample_rate, kReferenceAudioRate), " taps to reach ", kReferenceAudioRate,
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

// x_p[m·a + n] · k[j, n] summed over the 2W + a taps, for every phase j and output m, interleaved as out[m·b + j]
// (_apply_sinc_resample_kernel: pad W left and W + a right, conv1d with stride a, transpose, reshape, truncate).
void resample_channel(const float* x, int64_t length, const SincResampleKernel& kernel, float* out,
                      int64_t out_length) {
  const int64_t taps = kernel.taps_per_phase();
  const int64_t w = kernel.width;
  parallel_for(0, out_length, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const int64_t m = o / kernel.b, j = o % kernel.b;
      const float* k = kernel.taps.data() + j * taps;
      // Padded position m·a + n is input sample m·a + n − W; only in-range samples contribute.
      const int64_t first = m * kernel.a - w;
      const int64_t n_begin = std::max<int64_t>(0, -first), n_end = std::min<int64_t>(taps, length - first);
      double sum = 0;
      for (int64_t n = n_begin; n < n_end; ++n) sum += static_cast<double>(x[first + n]) * k[n];
      out[o] = static_cast<float>(sum);
    }
  });
}

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

int64_t reference_audio_samples(int64_t num_frames, int sample_rate, double fps) {
  const double max_duration = static_cast<double>(num_frames) / fps;
  return static_cast<int64_t>(max_duration * sample_rate);
}

SincResampleKernel sinc_resample_kernel(int orig_rate, int new_rate) {
  H3_CHECK(orig_rate > 0 && new_rate > 0 && orig_rate != new_rate, "a resampling kernel needs two different ",
           "positive rates, got ", orig_rate, " Hz and ", new_rate, " Hz");
  const KernelShape shape = kernel_shape(orig_rate, new_rate);
  H3_CHECK(kernel_taps(orig_rate, new_rate) <= kMaxResampleKernelTaps, "Resampling from ", orig_rate, " Hz to ",
           new_rate, " Hz needs a kernel of ", kernel_taps(orig_rate, new_rate), " taps, more than the ",
           kMaxResampleKernelTaps, " h3 allows.");
  SincResampleKernel k;
  k.a = shape.a;
  k.b = shape.b;
  k.width = shape.width;
  const double base = static_cast<double>(std::min(k.a, k.b)) * kRolloff;
  const int64_t taps = k.taps_per_phase();
  const double scale = base / static_cast<double>(k.a);
  k.taps.resize(static_cast<size_t>(k.b * taps));
  for (int64_t j = 0; j < k.b; ++j) {
    // torch.arange(0, -b, -1) / b: an int64 tensor over an int, divided in float32.
    const double phase = static_cast<double>(static_cast<float>(-j) / static_cast<float>(k.b));
    for (int64_t n = 0; n < taps; ++n) {
      double t = phase + static_cast<double>(n - k.width) / static_cast<double>(k.a);
      t *= base;
      t = std::clamp(t, -static_cast<double>(kLowpassFilterWidth), static_cast<double>(kLowpassFilterWidth));
      const double c = std::cos(t * std::numbers::pi / kLowpassFilterWidth / 2);
      const double window = c * c;
      t *= std::numbers::pi;
      const double sinc = t == 0 ? 1.0 : std::sin(t) / t;
      k.taps[static_cast<size_t>(j * taps + n)] = static_cast<float>(sinc * (window * scale));
    }
  }
  return k;
}

int64_t resampled_length(int64_t samples, const SincResampleKernel& kernel) {
  // torch.ceil(torch.as_tensor(new_freq * length / orig_freq)): the Python float becomes a float32 tensor.
  const double exact = static_cast<double>(kernel.b * samples) / static_cast<double>(kernel.a);
  return static_cast<int64_t>(std::ceil(static_cast<float>(exact)));
}

Waveform resample_waveform(const Waveform& waveform, int new_rate) {
  if (waveform.sample_rate == new_rate) return waveform;
  const SincResampleKernel kernel = sinc_resample_kernel(waveform.sample_rate, new_rate);
  const int64_t length = waveform.frames();
  const int64_t out_length = resampled_length(length, kernel);
  Waveform out;
  out.sample_rate = new_rate;
  out.channels = waveform.channels;
  out.samples.resize(static_cast<size_t>(out_length * waveform.channels));
  for (int c = 0; c < waveform.channels; ++c)
    resample_channel(waveform.channel(c), length, kernel, out.samples.data() + c * out_length, out_length);
  return out;
}

Waveform normalize_reference_audio(const Waveform& waveform, int64_t num_frames, int target_rate, double fps) {
  H3_CHECK(waveform.channels == 1 || waveform.channels == 2, "A reference soundtrack must be a mono or stereo ",
           "waveform, got ", waveform.channels, " channels.");
  H3_CHECK(waveform.sample_rate > 0 && num_frames >= 1, "normalizing a reference soundtrack needs a positive ",
           "sample rate and at least one frame, got ", waveform.sample_rate, " Hz and ", num_frames, " frames");
  const int64_t kept = std::min(waveform.frames(), reference_audio_samples(num_frames, waveform.sample_rate, fps));
  Waveform stereo;
  stereo.sample_rate = waveform.sample_rate;
  stereo.channels = 2;
  stereo.samples.reserve(static_cast<size_t>(2 * kept));
  for (int c = 0; c < 2; ++c) {
    const float* from = waveform.channel(std::min(c, waveform.channels - 1));
    stereo.samples.insert(stereo.samples.end(), from, from + kept);
  }
  return resample_waveform(stereo, target_rate);
}

Waveform read_reference_audio(const MediaSource& source, int64_t num_frames, AudioRole role, double min_seconds,
                              int target_rate, double fps) {
  H3_CHECK(num_frames >= 1, "reading a reference soundtrack needs at least one frame, got ", num_frames);
  const Waveform decoded = read_audio(source, {static_cast<double>(num_frames) / fps, min_seconds, role});
  return normalize_reference_audio(decoded, num_frames, target_rate, fps);
}

}  // namespace h3

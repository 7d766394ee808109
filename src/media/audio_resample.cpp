// The pure half of media/audio_input.h (no FFmpeg): the reference's truncation, upmix and torchaudio's sinc
// resampling. Kept apart from the decoders so that a build without FFmpeg (the GPU bundle, scripts/gpu/bundle.sh)
// still normalizes waveforms handed over in memory.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "media/audio_input.h"
#include "util/error.h"
#include "util/thread_pool.h"

#include "util/strict_fp.h"

namespace h3 {

namespace {

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

int64_t sinc_resample_kernel_taps(int orig_rate, int new_rate) {
  const KernelShape k = kernel_shape(orig_rate, new_rate);
  return k.b * (2 * k.width + k.a);
}

int64_t reference_audio_samples(int64_t num_frames, int sample_rate, double fps) {
  const double max_duration = static_cast<double>(num_frames) / fps;
  return static_cast<int64_t>(max_duration * sample_rate);
}

SincResampleKernel sinc_resample_kernel(int orig_rate, int new_rate) {
  H3_CHECK(orig_rate > 0 && new_rate > 0 && orig_rate != new_rate, "a resampling kernel needs two different ",
           "positive rates, got ", orig_rate, " Hz and ", new_rate, " Hz");
  const KernelShape shape = kernel_shape(orig_rate, new_rate);
  H3_CHECK(sinc_resample_kernel_taps(orig_rate, new_rate) <= kMaxResampleKernelTaps, "Resampling from ", orig_rate, " Hz to ",
           new_rate, " Hz needs a kernel of ", sinc_resample_kernel_taps(orig_rate, new_rate), " taps, more than the ",
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

}  // namespace h3

// libFuzzer target: the audio reference reader (src/media/audio_input.h) must refuse every malformed file with
// h3::Error and never crash or read out of bounds; the bytes come through the memory MediaSource (an AVIOContext
// over the buffer), read both as an audio reference and as a video's soundtrack (after the seek to 0). What it
// accepts is planar, mono or stereo, at most the asked duration, and resamples to 32 kHz at torchaudio's length.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "media/audio_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const h3::MediaSource source = h3::MediaSource::memory(data, size, "fuzz");
  try {
    h3::probe_audio(source);
  } catch (const h3::Error&) {
    return 0;
  }
  for (const h3::AudioRole role : {h3::AudioRole::AudioReference, h3::AudioRole::VideoSoundtrack}) {
    try {
      constexpr double kSeconds = 0.25;
      const h3::Waveform wave = h3::read_audio(source, {kSeconds, 0.0, role});
      if ((wave.channels != 1 && wave.channels != 2) || wave.frames() < 1 ||
          wave.frames() > static_cast<int64_t>(kSeconds * wave.sample_rate) ||
          wave.samples.size() != static_cast<size_t>(wave.frames() * wave.channels))
        __builtin_trap();
      const h3::Waveform out = h3::normalize_reference_audio(wave, 6);
      const int64_t kept = std::min(wave.frames(), h3::reference_audio_samples(6, wave.sample_rate));
      const int64_t want = wave.sample_rate == h3::kReferenceAudioRate
                               ? kept
                               : h3::resampled_length(kept, h3::sinc_resample_kernel(wave.sample_rate,
                                                                                     h3::kReferenceAudioRate));
      if (out.channels != 2 || out.sample_rate != h3::kReferenceAudioRate || out.frames() != want) __builtin_trap();
    } catch (const h3::Error&) {
    }
  }
  return 0;
}

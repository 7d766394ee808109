// WAV output: RIFF/WAVE, interleaved, little-endian, 16-bit PCM (default) or 32-bit IEEE float.
#pragma once
#include <cstdint>
#include <string>

namespace h3 {

enum class WavFormat { Pcm16, Float32 };

// One sample in [-1, 1] to 16 bits: clip to [-1, 1], then round(x · 32767) to nearest, ties to even.
// Scaling by 32767 (not 32768) keeps the mapping symmetric (±1 → ±32767, -32768 is never produced) and
// makes 0.0 exact; rounding (not truncation toward zero, as FastVideo does) halves the error and adds no
// bias toward zero. NaN maps to 0.
int16_t audio_float_to_i16(float x);

// Writes `channels` planar channels of `samples` samples each (channel c at planar[c·samples, (c+1)·samples))
// as an interleaved WAV at `sample_rate`. Float32 output is clipped to [-1, 1] as well. Written
// through OutputFile (util/output_file.h): a file is replaced whole or not at all (nothing is left at `path` on
// failure); a FIFO or a character device is written straight into.
void write_wav(const std::string& path, const float* planar, int channels, int64_t samples, int sample_rate,
               WavFormat format = WavFormat::Pcm16);
// The same into `out` (a staged file or a stream, util/output_file.h), finished but not committed: the caller
// publishes it.
class OutputFile;
void write_wav(OutputFile& out, const float* planar, int channels, int64_t samples, int sample_rate,
               WavFormat format = WavFormat::Pcm16);

}  // namespace h3

#include "media/wav_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "util/error.h"
#include "util/output_file.h"

namespace h3 {

namespace {

constexpr uint16_t kWaveFormatPcm = 1;
constexpr uint16_t kWaveFormatIeeeFloat = 3;

float clip_unit(float x) {
  if (std::isnan(x)) return 0.0f;
  return std::clamp(x, -1.0f, 1.0f);
}

class LittleEndianBuffer {
 public:
  explicit LittleEndianBuffer(size_t reserve) { bytes_.reserve(reserve); }
  void tag(const char (&four)[5]) { bytes_.insert(bytes_.end(), four, four + 4); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put(bits, 4);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  void put(uint32_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> bytes_;
};

}  // namespace

int16_t audio_float_to_i16(float x) {
  return static_cast<int16_t>(std::nearbyint(clip_unit(x) * 32767.0f));
}

void write_wav(const std::string& path, const float* planar, int channels, int64_t samples, int sample_rate,
               WavFormat format) {
  OutputFile out(path);  // refuses a bad destination before the samples are converted
  write_wav(out, planar, channels, samples, sample_rate, format);
  out.commit();
}

void write_wav(OutputFile& out, const float* planar, int channels, int64_t samples, int sample_rate,
               WavFormat format) {
  H3_CHECK(channels >= 1 && channels <= 8, "a WAV file needs 1 to 8 channels (got ", channels, ")");
  H3_CHECK(sample_rate >= 1000 && sample_rate <= 384000, "the WAV sample rate must be in [1000, 384000] Hz (got ",
           sample_rate, ")");
  H3_CHECK(samples >= 0, "the audio sample count must be >= 0 (got ", samples, ")");
  H3_CHECK(samples == 0 || planar != nullptr, "the audio samples are missing (", samples, " announced)");
  const bool is_float = format == WavFormat::Float32;
  const uint32_t bytes_per_sample = is_float ? 4 : 2;
  const uint64_t data_bytes = static_cast<uint64_t>(samples) * channels * bytes_per_sample;
  // The RIFF size field is 32 bits; keep the whole file (header ≤ 58 bytes) under 4 GiB.
  H3_CHECK(data_bytes <= 0xFFFFFFFFull - 64, "the audio is too long for a WAV file (", data_bytes,
           " bytes of samples; the format holds at most 4 GiB)");

  // Float WAVs use the 18-byte fmt chunk (cbSize = 0) and need a fact chunk (sample frames per channel).
  const uint32_t fmt_bytes = is_float ? 18 : 16;
  const uint32_t fact_bytes = is_float ? 12 : 0;
  const uint32_t riff_bytes = 4 + (8 + fmt_bytes) + fact_bytes + (8 + static_cast<uint32_t>(data_bytes));
  LittleEndianBuffer b(8 + riff_bytes);
  b.tag("RIFF");
  b.u32(riff_bytes);
  b.tag("WAVE");
  b.tag("fmt ");
  b.u32(fmt_bytes);
  b.u16(is_float ? kWaveFormatIeeeFloat : kWaveFormatPcm);
  b.u16(static_cast<uint16_t>(channels));
  b.u32(static_cast<uint32_t>(sample_rate));
  b.u32(static_cast<uint32_t>(sample_rate) * channels * bytes_per_sample);  // byte rate
  b.u16(static_cast<uint16_t>(channels * bytes_per_sample));                // block align
  b.u16(static_cast<uint16_t>(8 * bytes_per_sample));                       // bits per sample
  if (is_float) {
    b.u16(0);  // cbSize
    b.tag("fact");
    b.u32(4);
    b.u32(static_cast<uint32_t>(samples));
  }
  b.tag("data");
  b.u32(static_cast<uint32_t>(data_bytes));
  for (int64_t i = 0; i < samples; ++i) {
    for (int c = 0; c < channels; ++c) {
      const float x = planar[c * samples + i];
      if (is_float)
        b.f32(clip_unit(x));
      else
        b.u16(static_cast<uint16_t>(audio_float_to_i16(x)));
    }
  }
  out.write(b.bytes().data(), b.bytes().size());
  out.finish();
}

}  // namespace h3

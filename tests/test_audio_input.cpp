// Audio references (src/media/audio_input.h) against tests/fixtures/media (tools/reference/fx_media.py):
// torchaudio's resampling kernels and outputs from seven rates to 32 kHz, its float32 output length, the
// reference's _normalize_audio_condition, the reference's own PyAV decode of WAV/FLAC/MP3/AAC/Opus files and video
// soundtracks sample for sample, decoding that stops early on a two-hour file, and one sentence for every bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "media/audio_input.h"
#include "media_fixtures.h"

namespace h3 {
namespace {

// fx_media.py hash_noise / test_signal, evaluated the same way (the sine in float64, the rest in float32).
float hash_noise(int64_t n, int64_t seed) {
  uint64_t h = ((static_cast<uint64_t>(n) + static_cast<uint64_t>(seed) * (1u << 20)) & 0xFFFFFFFFu) * 0x9E3779B1u;
  h &= 0xFFFFFFFFu;
  h ^= h >> 16;
  h = (h * 0x85EBCA6Bu) & 0xFFFFFFFFu;
  h ^= h >> 13;
  return static_cast<float>(static_cast<double>(h >> 8) / static_cast<double>(1 << 24) - 0.5);
}

Waveform test_signal(int channels, int64_t count, int rate, int64_t seed) {
  Waveform w;
  w.sample_rate = rate;
  w.channels = channels;
  for (int c = 0; c < channels; ++c) {
    const double frequency = 440.0 * (c + 1) + 37.0 * static_cast<double>(seed);
    const double step = 2.0 * M_PI * frequency;
    for (int64_t n = 0; n < count; ++n) {
      const auto tone = static_cast<float>(0.4 * std::sin(step * static_cast<double>(n) / rate));
      w.samples.push_back(tone + 0.2f * hash_noise(n, seed * 8 + c));
    }
  }
  return w;
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

// Bound on the rel L2 distance to torchaudio's float32 output: torch's conv1d sums the up to 459 products of a phase
// in float32 (relative rounding ~1e-7 per output), h3 sums them in float64; 1e-6 is the brief's parity bound.
constexpr double kResampleTolerance = 1e-6;

TEST(AudioInputResample, KernelsAreTorchaudios) {
  const nlohmann::json index = media_fixture_json("resample.json");
  for (const auto& [rate, k] : index["kernels"].items()) {
    const SincResampleKernel kernel = sinc_resample_kernel(std::stoi(rate), kReferenceAudioRate);
    EXPECT_EQ(kernel.width, k["width"].get<int64_t>()) << rate;
    EXPECT_EQ(kernel.b, k["shape"][0].get<int64_t>()) << rate;
    EXPECT_EQ(kernel.taps_per_phase(), k["shape"][2].get<int64_t>()) << rate;
    const int64_t taps = kernel.taps_per_phase();
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(kernel.taps[i], k["row0_head"][i].get<float>()) << rate << " tap " << i;
      EXPECT_EQ(kernel.taps[(kernel.b - 1) * taps + i], k["row_last_head"][i].get<float>()) << rate << " tap " << i;
    }
    if (!k["file"].is_null()) {
      EXPECT_TRUE(kernel.taps == read_media_floats(k["file"])) << rate;
    }
  }
}

TEST(AudioInputResample, OutputsAreTorchaudios) {
  const nlohmann::json index = media_fixture_json("resample.json");
  ASSERT_EQ(index["target_rate"].get<int>(), kReferenceAudioRate);
  double worst = 0;
  for (const auto& c : index["cases"]) {
    const Waveform in = test_signal(c["channels"], c["samples"], c["rate"], c["seed"]);
    for (int i = 0; i < 4; ++i)  // the same input (the sine may differ by an ulp of float64, never more)
      EXPECT_NEAR(in.samples[i], c["input_head"][i].get<float>(), 1e-7) << c["name"];
    const Waveform out = resample_waveform(in, kReferenceAudioRate);
    EXPECT_EQ(out.sample_rate, kReferenceAudioRate);
    EXPECT_EQ(out.frames(), c["out_samples"].get<int64_t>()) << c["name"];
    const std::vector<float> want = read_media_floats(c["expected"]);
    ASSERT_EQ(out.samples.size(), want.size()) << c["name"];
    const double err = rel_l2(out.samples, want);
    EXPECT_LT(err, kResampleTolerance) << c["name"];
    worst = std::max(worst, err);
  }
  std::printf("  resampling to 32 kHz: worst rel L2 vs torchaudio %.3g over %zu cases\n", worst,
              index["cases"].size());
}

TEST(AudioInputResample, LengthRoundsThroughFloat32AsTorchDoes) {
  const nlohmann::json index = media_fixture_json("resample.json");
  for (const auto& c : index["long"]) {
    const int rate = c["rate"];
    const int64_t samples = c["samples"];
    const SincResampleKernel kernel = sinc_resample_kernel(rate, kReferenceAudioRate);
    // These lengths were picked where float32 rounding takes ceil(b·N/a) one below the exact value.
    EXPECT_EQ(c["out_samples"].get<int64_t>(), c["exact_ceil"].get<int64_t>() - 1);
    EXPECT_EQ(resampled_length(samples, kernel), c["out_samples"].get<int64_t>()) << rate << " " << samples;
    const Waveform out = resample_waveform(test_signal(1, samples, rate, c["seed"]), kReferenceAudioRate);
    ASSERT_EQ(out.frames(), c["out_samples"].get<int64_t>());
    const std::vector<float> head(out.samples.begin(), out.samples.begin() + 64);
    const std::vector<float> tail(out.samples.end() - 64, out.samples.end());
    EXPECT_LT(rel_l2(head, c["head"].get<std::vector<float>>()), kResampleTolerance);
    EXPECT_LT(rel_l2(tail, c["tail"].get<std::vector<float>>()), kResampleTolerance);
  }
}

TEST(AudioInputResample, SameRatePassesUntouched) {
  const Waveform in = test_signal(2, 1000, kReferenceAudioRate, 3);
  const Waveform out = resample_waveform(in, kReferenceAudioRate);
  EXPECT_TRUE(out.samples == in.samples);
  EXPECT_EQ(out.sample_rate, kReferenceAudioRate);
}

TEST(AudioInputNormalize, IsTheReferencesNormalizeAudioCondition) {
  const nlohmann::json index = media_fixture_json("resample.json");
  for (const auto& c : index["normalize"]) {
    const Waveform in = test_signal(c["channels"], c["samples"], c["rate"], c["seed"]);
    const Waveform out = normalize_reference_audio(in, c["num_frames"]);
    EXPECT_EQ(out.channels, 2);
    EXPECT_EQ(out.frames(), c["out_samples"].get<int64_t>()) << c["name"];
    const std::vector<float> want = read_media_floats(c["expected"]);
    ASSERT_EQ(out.samples.size(), want.size()) << c["name"];
    if (c["rate"].get<int>() == kReferenceAudioRate) {
      EXPECT_TRUE(out.samples == want) << c["name"];  // truncation and upmix only: exact
    } else {
      EXPECT_LT(rel_l2(out.samples, want), kResampleTolerance) << c["name"];
    }
  }
  EXPECT_EQ(reference_audio_samples(124, 44100), 227850);  // int(124 / 24 · 44100)
  EXPECT_EQ(reference_audio_samples(1, 44100), 1837);      // int(1837.4999...)
}

TEST(AudioInputFiles, DecodeIsTheReferencesSampleForSample) {
  const nlohmann::json index = media_fixture_json("files.json");
  int files = 0;
  for (const auto& c : index["cases"]) {
    if (!c.contains("audio")) continue;
    const std::string path = media_fixture_path(c["file"]);
    const AudioProbe probe = probe_audio(MediaSource::file(path));
    EXPECT_EQ(probe.sample_rate, c["sample_rate"].get<int>()) << path;
    EXPECT_EQ(probe.channels, c["channels"].get<int>()) << path;
    EXPECT_GT(probe.duration_seconds, 0) << path;
    // A video file's soundtrack as the reference's _decode_video_file reads it, an audio file as _decode_audio_file.
    const AudioRole role = c.contains("rgb") ? AudioRole::VideoSoundtrack : AudioRole::AudioReference;
    const Waveform got = read_audio(MediaSource::file(path), {3600.0, 0.0, role});
    EXPECT_EQ(got.sample_rate, c["sample_rate"].get<int>()) << path;
    EXPECT_EQ(got.channels, c["channels"].get<int>()) << path;
    EXPECT_EQ(got.frames(), c["samples"].get<int64_t>()) << path;
    EXPECT_TRUE(got.samples == read_media_floats(c["audio"])) << path << " (" << c["what"] << ")";
    // From memory, and truncated at the native rate: the first int(seconds · rate) samples.
    const std::vector<uint8_t> bytes = read_media_fixture(c["file"]);
    const Waveform part = read_audio(MediaSource::memory(bytes.data(), bytes.size(), "buffer"), {0.01, 0.0, role});
    const auto keep = static_cast<int64_t>(0.01 * got.sample_rate);
    ASSERT_EQ(part.frames(), std::min(keep, got.frames())) << path;
    for (int ch = 0; ch < got.channels; ++ch)
      EXPECT_TRUE(std::equal(part.channel(ch), part.channel(ch) + part.frames(), got.channel(ch))) << path;
    ++files;
  }
  EXPECT_EQ(files, 11);
}

TEST(AudioInputFiles, SoundtrackOfMatroskaStartsWhereTheReferencesSeekLands) {
  // The reference reads a video's soundtrack after container.seek(0), which in these two files lands one audio
  // packet in (an MP3 frame of 1152 samples, an Opus frame of 960); read as an audio reference it starts at 0.
  for (const auto& [file, packet] : {std::pair{"files/clip12_mp3.mkv", 1152}, std::pair{"files/clip25_vp9_opus.webm", 960}}) {
    const MediaSource source = MediaSource::file(media_fixture_path(file));
    const Waveform whole = read_audio(source, {3600.0, 0.0, AudioRole::AudioReference});
    const Waveform soundtrack = read_audio(source, {3600.0, 0.0, AudioRole::VideoSoundtrack});
    EXPECT_EQ(whole.frames() - soundtrack.frames(), packet) << file;
  }
}

TEST(AudioInputFiles, ReferenceSoundtrackIsDecodeThenNormalize) {
  const std::string path = media_fixture_path("files/tone44k.mp3");
  const Waveform whole = read_audio(MediaSource::file(path), {3600.0, 0.0});
  for (int64_t num_frames : {1, 2}) {
    const Waveform want = normalize_reference_audio(whole, num_frames);
    const Waveform got = read_reference_audio(MediaSource::file(path), num_frames, AudioRole::AudioReference);
    EXPECT_EQ(got.channels, 2);
    EXPECT_EQ(got.sample_rate, kReferenceAudioRate);
    EXPECT_TRUE(got.samples == want.samples) << num_frames;
  }
}

TEST(AudioInputBounded, TwoHourFileStopsAfterWhatTheRequestUses) {
  // 2 hours of 48 kHz stereo s16: 1.4 GB that exist only as they are read.
  const VirtualMedia file = virtual_wav(48000, 2, int64_t{2} * 3600 * 48000);
  const AudioProbe probe = probe_audio(file.source("long.wav"));
  EXPECT_EQ(probe.sample_rate, 48000);
  EXPECT_NEAR(probe.duration_seconds, 7200.0, 1.0);
  *file.furthest = 0;
  const Waveform out = read_reference_audio(file.source("long.wav"), 362, AudioRole::AudioReference);
  const int64_t kept = reference_audio_samples(362, 48000);  // 724000 samples = 15.08 s
  EXPECT_EQ(out.frames(), resampled_length(kept, sinc_resample_kernel(48000, kReferenceAudioRate)));
  EXPECT_LT(*file.furthest, (kept + 48000) * 4) << "read up to byte " << *file.furthest;
}

class AudioInputErrors : public MediaScratch {
 protected:
  // probe_audio, read_audio and read_reference_audio all refuse `source` with a sentence naming it and `rule`.
  void expect_refused(const MediaSource& source, const std::string& rule) {
    for (const std::string& message : {media_error_of([&] { probe_audio(source); }),
                                       media_error_of([&] { read_audio(source, {10.0, 0.0}); }),
                                       media_error_of([&] {
                                         read_reference_audio(source, 124, AudioRole::VideoSoundtrack);
                                       })}) {
      EXPECT_EQ(message.rfind("Cannot read the audio " + source.name() + ": ", 0), 0u) << message;
      EXPECT_NE(message.find(rule), std::string::npos) << message;
      EXPECT_EQ(message.back(), '.') << message;
    }
  }
};

TEST_F(AudioInputErrors, EveryRuleHasItsSentence) {
  expect_refused(MediaSource::file((dir_ / "missing.wav").string()), "the file does not exist");
  expect_refused(MediaSource::file(dir_.string()), "it is not a regular file");
  expect_refused(MediaSource::file(write("empty.wav", {})), "the file is empty");
  const std::string text = "plain words that are no sound at all, and a few more of them to fill the prober's window\n";
  expect_refused(MediaSource::file(write("notes.wav", std::vector<uint8_t>(text.begin(), text.end()))),
                 "it is not in a media format FFmpeg can read");
  expect_refused(MediaSource::file(media_fixture_path("files/clip30_rot90.mp4")), "it has no audio stream");
  const VirtualMedia surround = virtual_wav(48000, 6, 4800);
  expect_refused(surround.source("surround.wav"), "it has 6 audio channels; a reference soundtrack must be mono or "
                                                  "stereo");
  const VirtualMedia odd_rate = virtual_wav(44101, 1, 44101);
  expect_refused(odd_rate.source("odd.wav"), "its sample rate of 44101 Hz needs a resampling kernel of");
  EXPECT_NE(media_error_of([] { sinc_resample_kernel(44101, kReferenceAudioRate); }).find("h3 allows."),
            std::string::npos);
  // A rate so low that the duration asked for keeps no sample (int(0.25 s · 1 Hz) = 0; found by fuzz_audio_input).
  const VirtualMedia one_hz = virtual_wav(1, 1, 4);
  const std::string no_sample = media_error_of([&] { read_audio(one_hz.source("1hz.wav"), {0.25, 0.0}); });
  EXPECT_EQ(no_sample, "Cannot read the audio 1hz.wav: its sample rate of 1 Hz keeps no sample of the 0.25 s asked "
                       "for; that takes at least 4 Hz.");
  // A WAV whose data chunk is empty.
  const VirtualMedia silent = virtual_wav(16000, 1, 0);
  const std::string empty_data = write("no_samples.wav", std::vector<uint8_t>(silent.header.begin(), silent.header.end()));
  const std::string none = media_error_of([&] { read_audio(MediaSource::file(empty_data), {1.0, 0.0}); });
  EXPECT_NE(none.find("it holds no audio samples"), std::string::npos) << none;
  // Shorter than the caller's minimum (0.1 s of audio, 2 s asked for).
  const std::string path = media_fixture_path("files/tone44k_stereo.wav");
  const std::string short_one = media_error_of([&] { read_audio(MediaSource::file(path), {15.0, 2.0}); });
  EXPECT_NE(short_one.find("s long; an audio reference must be at least 2 s long"), std::string::npos) << short_one;
  EXPECT_EQ(short_one.rfind("Cannot read the audio " + path + ": it is 0.05 s long", 0), 0u) << short_one;
}

}  // namespace
}  // namespace h3

// Test helper: the `media` fixture family (tools/reference/fx_media.py), scratch folders for bad files, and
// virtual media files of any length (made up from their offset when read, never held), for the bounded-decoding
// tests of media/video_input.h and media/audio_input.h.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "media/media_source.h"
#include "test_source_dir.h"
#include "util/error.h"

namespace h3 {

inline std::string media_fixture_path(const std::string& relative) {
  return test_source_dir() + "/tests/fixtures/media/" + relative;
}

inline std::vector<uint8_t> read_media_fixture(const std::string& relative) {
  std::ifstream in(media_fixture_path(relative), std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << relative << " (made by tools/reference/fx_media.py)";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline nlohmann::json media_fixture_json(const std::string& relative) {
  const std::vector<uint8_t> bytes = read_media_fixture(relative);
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

inline std::vector<float> read_media_floats(const std::string& relative) {
  const std::vector<uint8_t> bytes = read_media_fixture(relative);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

inline std::string media_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A scratch folder, removed at the end of each test.
class MediaScratch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("h3_media_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  }
  std::filesystem::path dir_;
};

// A file made of a header and `count` equal-sized records generated from their index; counts the bytes it serves.
struct VirtualMedia {
  std::string header;
  int64_t record_bytes = 0, count = 0;
  std::function<void(int64_t record, int64_t offset, uint8_t* dst, size_t n)> record;  // bytes of one record
  std::shared_ptr<std::atomic<int64_t>> served = std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<std::atomic<int64_t>> furthest = std::make_shared<std::atomic<int64_t>>(0);

  int64_t size() const { return static_cast<int64_t>(header.size()) + record_bytes * count; }
  MediaSource source(const std::string& name) const {
    VirtualMedia self = *this;
    return MediaSource::reader(name, size(), [self](int64_t offset, uint8_t* dst, size_t n) {
      size_t done = 0;
      while (done < n && offset < self.size()) {
        const auto h = static_cast<int64_t>(self.header.size());
        size_t step = 0;
        if (offset < h) {
          step = std::min<size_t>(n - done, static_cast<size_t>(h - offset));
          std::memcpy(dst + done, self.header.data() + offset, step);
        } else {
          const int64_t r = (offset - h) / self.record_bytes, within = (offset - h) % self.record_bytes;
          step = std::min<size_t>(n - done, static_cast<size_t>(self.record_bytes - within));
          self.record(r, within, dst + done, step);
        }
        done += step;
        offset += static_cast<int64_t>(step);
      }
      *self.served += static_cast<int64_t>(done);
      int64_t seen = self.furthest->load();
      while (offset > seen && !self.furthest->compare_exchange_weak(seen, offset)) {
      }
      return done;
    });
  }
};

// A YUV4MPEG2 (Y4M) stream of `frames` 4:4:4 frames at `fps`/1: frame f has luma 16 + f % 200 everywhere.
inline VirtualMedia virtual_y4m(int width, int height, int fps, int64_t frames) {
  VirtualMedia v;
  v.header = "YUV4MPEG2 W" + std::to_string(width) + " H" + std::to_string(height) + " F" + std::to_string(fps) +
             ":1 Ip A1:1 C444\n";
  const int64_t plane = static_cast<int64_t>(width) * height;
  v.record_bytes = 6 + 3 * plane;
  v.count = frames;
  v.record = [plane](int64_t f, int64_t offset, uint8_t* dst, size_t n) {
    static const char kFrame[] = "FRAME\n";
    for (size_t i = 0; i < n; ++i) {
      const int64_t at = offset + static_cast<int64_t>(i);
      dst[i] = at < 6 ? static_cast<uint8_t>(kFrame[at]) : at < 6 + plane ? static_cast<uint8_t>(16 + f % 200) : 128;
    }
  };
  return v;
}

// A WAV (PCM s16) of `samples` frames of `channels` channels at `rate`: a 16-sample sawtooth.
inline VirtualMedia virtual_wav(int rate, int channels, int64_t samples) {
  VirtualMedia v;
  const auto le32 = [](uint32_t x) { return std::string{char(x), char(x >> 8), char(x >> 16), char(x >> 24)}; };
  const auto le16 = [](uint16_t x) { return std::string{char(x), char(x >> 8)}; };
  const uint32_t block = 2u * static_cast<uint32_t>(channels);
  const uint32_t data = static_cast<uint32_t>(std::min<int64_t>(samples * block, 0xFFFFFFF0ll));
  v.header = "RIFF" + le32(36 + data) + "WAVEfmt " + le32(16) + le16(1) + le16(static_cast<uint16_t>(channels)) +
             le32(static_cast<uint32_t>(rate)) + le32(static_cast<uint32_t>(rate) * block) +
             le16(static_cast<uint16_t>(block)) + le16(16) + "data" + le32(data);
  v.record_bytes = block;
  v.count = samples;
  v.record = [](int64_t s, int64_t offset, uint8_t* dst, size_t n) {
    const auto value = static_cast<uint16_t>(static_cast<int16_t>((s % 16) * 2048 - 16384));
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>((offset + static_cast<int64_t>(i)) % 2 ? value >> 8 : value);
  };
  return v;
}

}  // namespace h3

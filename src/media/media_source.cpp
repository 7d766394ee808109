#include "media/media_source.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace h3 {

MediaSource MediaSource::file(std::string path) {
  MediaSource s;
  s.name_ = std::move(path);
  return s;
}

MediaSource MediaSource::memory(const uint8_t* data, size_t size, std::string name) {
  H3_CHECK(data != nullptr || size == 0, "a memory media source needs its bytes");
  return reader(std::move(name), static_cast<int64_t>(size), [data, size](int64_t offset, uint8_t* dst, size_t n) {
    if (offset < 0 || static_cast<uint64_t>(offset) >= size) return size_t{0};
    const size_t count = std::min(n, size - static_cast<size_t>(offset));
    std::memcpy(dst, data + offset, count);
    return count;
  });
}

MediaSource MediaSource::reader(std::string name, int64_t size, ReadAt read_at) {
  H3_CHECK(size >= 0 && read_at, "a reader media source needs a size of at least 0 bytes and a read function");
  MediaSource s;
  s.name_ = std::move(name);
  s.size_ = size;
  s.read_at_ = std::move(read_at);
  return s;
}

}  // namespace h3

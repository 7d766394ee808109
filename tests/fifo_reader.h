// Test helper: reads a FIFO to its end on a thread of its own, as a consumer of h3's output would.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <thread>

namespace h3 {

class FifoReader {
 public:
  // Starts reading: opening the FIFO blocks until a writer opens it too.
  explicit FifoReader(std::string path)
      : path_(std::move(path)), thread_([this] {
          std::ifstream f(path_, std::ios::binary);
          bytes_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        }) {}
  ~FifoReader() {
    if (thread_.joinable()) finish();
  }
  FifoReader(const FifoReader&) = delete;
  FifoReader& operator=(const FifoReader&) = delete;

  // Once the writer is done: what the reader got. A reader still waiting for a writer (the writer never came) is
  // released by opening and closing the FIFO here, so it gets nothing instead of blocking forever.
  const std::string& finish() {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // fails (ENXIO) once the reader left
    if (fd >= 0) ::close(fd);
    thread_.join();
    return bytes_;
  }

 private:
  std::string path_;
  std::string bytes_;
  std::thread thread_;
};

}  // namespace h3

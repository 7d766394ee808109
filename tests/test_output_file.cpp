// util/output_file.h: how every output is written by what is at its path (a file replaced whole, a FIFO or a device
// written straight into, the rest refused).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fifo_reader.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/output_file.h"

namespace h3 {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool is_fifo(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

bool is_char_device(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

TEST(OutputFile, AFileIsReplacedWholeOrNotAtAll) {
  TempDir dir("output-file");
  const std::string path = dir / "a.bin";
  OutputFile(path).write_all_and_commit("first", 5);
  EXPECT_EQ(read_all(path), "first");
  {
    OutputFile out(path);
    EXPECT_EQ(out.temp_path(), path + ".partial-" + std::to_string(::getpid()));
    out.write("second, ", 8);
    out.write("longer", 6);
    EXPECT_EQ(read_all(path), "first") << "the destination is untouched until commit()";
    out.commit();
  }
  EXPECT_EQ(read_all(path), "second, longer");
  {
    OutputFile abandoned(path);
    abandoned.write("never committed", 15);
  }
  EXPECT_EQ(read_all(path), "second, longer");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"a.bin"}) << "no temporary file is left";
  EXPECT_NE(error_of([&] { OutputFile{dir / "missing/a.bin"}; }).find("does not exist"), std::string::npos);
}

// A link to a file: the file is replaced and the link stays a link (rename over the link would replace the link).
TEST(OutputFile, ALinkToAFileReplacesTheFileAndKeepsTheLink) {
  TempDir dir("output-link");
  fs::create_directory(dir / "real");
  std::ofstream(dir / "real/target.wav") << "old";
  fs::create_symlink("real/target.wav", dir / "link.wav");
  OutputFile(dir / "link.wav").write_all_and_commit("new", 3);
  EXPECT_TRUE(fs::is_symlink(dir / "link.wav"));
  EXPECT_EQ(read_all(dir / "real/target.wav"), "new");
  EXPECT_EQ(names_in(dir / "real"), std::vector<std::string>{"target.wav"});
}

TEST(OutputFile, AFifoIsWrittenStraightIntoAndStaysAFifo) {
  TempDir dir("output-fifo");
  const std::string fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string payload(300000, 'x');  // more than a pipe buffer: the writer waits for the reader
  FifoReader reader(fifo);
  OutputFile out(fifo);
  EXPECT_TRUE(out.streamed());
  EXPECT_EQ(out.stream_kind(), "a FIFO");
  EXPECT_NE(error_of([&] { out.temp_path(); }).find("it is a FIFO, written straight into"), std::string::npos);
  out.write_all_and_commit(payload.data(), payload.size());
  EXPECT_EQ(reader.finish(), payload);
  EXPECT_TRUE(is_fifo(fifo));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"pipe"});
}

// A reader that leaves early: the write fails with EPIPE (with SIGPIPE ignored, as h3's main does), as a sentence.
TEST(OutputFile, AFifoWhoseReaderLeavesIsAnError) {
  TempDir dir("output-epipe");
  const std::string fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto previous = std::signal(SIGPIPE, SIG_IGN);
  std::thread reader([&] { ::close(::open(fifo.c_str(), O_RDONLY)); });
  const std::string payload(1 << 20, 'x');
  const std::string e = error_of([&] { OutputFile(fifo).write_all_and_commit(payload.data(), payload.size()); });
  reader.join();
  std::signal(SIGPIPE, previous);
  EXPECT_EQ(e, "cannot write " + fifo + ": Broken pipe");
}

TEST(OutputFile, DevicesAreWrittenStraightIntoAndAFullOneIsAnError) {
  OutputFile null_device("/dev/null");
  EXPECT_TRUE(null_device.streamed());
  EXPECT_EQ(null_device.stream_kind(), "a character device");
  null_device.write_all_and_commit("discarded", 9);
  EXPECT_TRUE(is_char_device("/dev/null")) << "/dev/null must never become a regular file";
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  EXPECT_EQ(error_of([] { OutputFile("/dev/full").write_all_and_commit("x", 1); }),
            "cannot write /dev/full: No space left on device");
  EXPECT_TRUE(is_char_device("/dev/full"));
}

TEST(OutputFile, FoldersSocketsAndLinksToNothingAreRefused) {
  TempDir dir("output-refused");
  fs::create_directory(dir / "folder");
  fs::create_symlink("nowhere.wav", dir / "dangling.wav");
  fs::create_symlink("loop-b", dir / "loop-a");
  fs::create_symlink("loop-a", dir / "loop-b");
  const std::string socket_path = dir / "socket";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof addr.sun_path);
  std::copy(socket_path.begin(), socket_path.end(), addr.sun_path);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::pair<std::string, std::string> cases[] = {
      {dir / "folder", "it is a folder; give a file name inside it"},
      {socket_path, "it is a socket; h3 writes to regular files, FIFOs and character devices only"},
      {dir / "dangling.wav",
       "it is a symbolic link to a missing file ('nowhere.wav'); give the file's own path or remove the link"},
      {dir / "loop-a", "it is a symbolic link that cannot be followed (Too many levels of symbolic links)"},
  };
  for (const auto& [path, why] : cases) {
    EXPECT_EQ(inspect_output_target(path).kind, OutputKind::Refused) << path;
    EXPECT_EQ(error_of([&] { OutputFile{path}; }), "cannot write " + path + ": " + why);
  }
  ::close(fd);
  EXPECT_FALSE(fs::exists(dir / "nowhere.wav"));
  EXPECT_TRUE(fs::is_empty(dir / "folder"));
}

}  // namespace
}  // namespace h3

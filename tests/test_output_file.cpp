// util/output_file.h and util/overwrite_check.h: how every output is written by what is at its path (a file replaced
// whole, a FIFO or a device written straight into, the rest refused), and the rule that outputs never overwrite the
// model folder, the inputs or each other.
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
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fifo_reader.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/output_file.h"
#include "util/overwrite_check.h"

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

// ---------------------------------------------------------------------------------------------------------------
// Outputs never overwrite the model folder, the inputs or each other.

class OverwriteCheck : public testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "model/transformer");
    std::ofstream(dir_ / "model/transformer/config.json") << "{}";
    std::ofstream(dir_ / "first.png") << "a picture";
    fs::create_directory(dir_ / "frames");
    std::ofstream(dir_ / "frames/frame_00003.ppm") << "an earlier frame";
    std::ofstream(dir_ / "frames/notes.ppm") << "not a frame name";
  }
  std::string at(const std::string& name) const { return dir_ / name; }
  std::optional<std::string> problem(const std::vector<NamedPath>& outputs, const std::string& frames = "") const {
    std::vector<OutputFolder> folders;
    if (!frames.empty())
      folders.push_back({{"--frames-dir", frames}, [](const std::string& n) { return n.starts_with("frame_"); }});
    return overwrite_problem(at("model"), {{"--first-frame", at("first.png")}, {"--ref-audio", at("frames/notes.ppm")}},
                             outputs, folders);
  }
  TempDir dir_{"overwrite"};
};

TEST_F(OverwriteCheck, OutputsApartFromEverythingPass) {
  EXPECT_EQ(problem({{"-o", at("out.mp4")}, {"--wav", at("out.wav")}, {"-o", ""}}, at("frames")), std::nullopt);
  EXPECT_EQ(problem({{"-o", at("model-copy.mp4")}}, at("new-frames")), std::nullopt) << "a prefix is not a folder";
}

TEST_F(OverwriteCheck, NothingInsideTheModelFolder) {
  EXPECT_EQ(problem({{"-o", at("model/transformer/config.json")}}),
            "-o '" + at("model/transformer/config.json") + "' is inside the model folder '" + at("model") +
                "'; write outputs elsewhere.");
  EXPECT_EQ(problem({{"--wav", at("model/new.wav")}}),
            "--wav '" + at("model/new.wav") + "' is inside the model folder '" + at("model") +
                "'; write outputs elsewhere.");
  // Through a link to a folder inside it, through "..", and as the folder itself.
  fs::create_directory_symlink("model/transformer", at("alias"));
  EXPECT_NE(problem({{"-o", at("alias/x.mp4")}}).value_or("").find("is inside the model folder"), std::string::npos);
  EXPECT_NE(problem({{"-o", at("frames/../model/x.mp4")}}).value_or("").find("is inside the model folder"),
            std::string::npos);
  EXPECT_EQ(problem({}, at("model")),
            "--frames-dir '" + at("model") + "' is the model folder '" + at("model") + "'; write outputs elsewhere.");
}

// A snapshot's files may live elsewhere (a Hugging Face cache links them to its blobs; a hard link): the file
// itself counts, not where its name is.
TEST_F(OverwriteCheck, NotTheSameFileAsOneOfTheModelFolder) {
  fs::create_directory(at("blobs"));
  std::ofstream(at("blobs/1234abcd")) << "weights";
  fs::create_symlink(at("blobs/1234abcd"), at("model/transformer/weights.safetensors"));
  fs::create_hard_link(at("model/transformer/config.json"), at("hard-link.json"));
  EXPECT_EQ(problem({{"-o", at("blobs/1234abcd")}}),
            "-o '" + at("blobs/1234abcd") + "' is the model file '" + at("model/transformer/weights.safetensors") +
                "' (the same file); write outputs elsewhere.");
  EXPECT_NE(problem({{"--wav", at("hard-link.json")}}).value_or("").find("is the model file"), std::string::npos);
}

TEST_F(OverwriteCheck, NotAnInput) {
  EXPECT_EQ(problem({{"-o", at("first.png")}}), "-o '" + at("first.png") + "' is the same file as --first-frame '" +
                                                    at("first.png") + "'; h3 does not write over its inputs.");
  fs::create_symlink("first.png", at("link.png"));
  EXPECT_NE(problem({{"--wav", at("link.png")}}).value_or("").find("is the same file as --first-frame"),
            std::string::npos);
  EXPECT_NE(problem({{"--wav", at("frames/../first.png")}}).value_or("").find("is the same file as --first-frame"),
            std::string::npos);
}

TEST_F(OverwriteCheck, NotAnotherOutput) {
  // Neither exists yet: compared by canonical folder and name.
  EXPECT_EQ(problem({{"-o", at("same.mp4")}, {"--wav", at("frames/../same.mp4")}}),
            "--wav '" + at("frames/../same.mp4") + "' is the same file as -o '" + at("same.mp4") +
                "'; give each output its own name.");
}

TEST_F(OverwriteCheck, AFramesFolderWritesItsFrameNamesOnly) {
  const std::vector<NamedPath> none;
  EXPECT_EQ(overwrite_problem(at("model"), {{"--last-frame", at("frames/frame_00003.ppm")}}, none,
                              {{{"--frames-dir", at("frames")}, [](const std::string& n) { return n == "frame_00003.ppm"; }}}),
            "--frames-dir '" + at("frames") + "' would write over the input --last-frame '" +
                at("frames/frame_00003.ppm") + "'; h3 does not write over its inputs.");
  EXPECT_EQ(problem({{"-o", at("frames/frame_00009.ppm")}}, at("frames")),
            "--frames-dir '" + at("frames") + "' would write over -o '" + at("frames/frame_00009.ppm") +
                "'; give each output its own place.");
  EXPECT_EQ(problem({}, at("frames")), std::nullopt) << "frames/notes.ppm (an input) is not a frame name";
}

}  // namespace
}  // namespace h3

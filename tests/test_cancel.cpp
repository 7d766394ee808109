// Cancel does what it says (issue 22, item 6): the engine stops inside every phase — between transformer blocks,
// conditioner layers, VAE tile batches and blocks, audio VAE blocks, weight tensors — within a bound at the demo's
// size on the CPU; the h3 binary cancelled by SIGINT in every phase exits 130 and leaves nothing new on disk, a
// cancel during the writes included; a second Ctrl-C quits at once and still leaves no partial file; the session
// goes back to its prompt.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "h3/h3.h"
#include "tools/tiny_model.h"
#include "util/output_file.h"
#include "util/partial_files.h"

namespace {

using namespace h3_cli_test;

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double now_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// scripts/demo.sh's request (256x256, 124 frames) with 2 passes instead of 4: the work between two checks, which
// the latency is made of, does not depend on the number of passes.
h3::GenerationRequest demo_request() {
  h3::GenerationRequest r;
  r.prompt = "A red fox walks through fresh snow in a pine forest at dawn. Soft footsteps in the snow, wind in the "
             "branches.";
  r.width = 256;
  r.height = 256;
  r.frames = 124;
  r.steps = 2;
  return r;
}

std::unique_ptr<h3::Engine> open_tiny_engine() {
  static const std::string dir = [] {
    const std::string d = (fs::temp_directory_path() / ("h3_cancel_tiny_" + std::to_string(getpid()))).string();
    fs::remove_all(d);
    h3::make_tiny_model(d, 7);
    return d;
  }();
  return h3::Engine::open({.model_dir = dir, .device = "cpu"});
}

struct CancelMeasure {
  bool landed = false;        // the flag was raised while the phase ran and generate() threw h3::Cancelled
  double wall_seconds = 0;    // from the raise to the throw
  double cpu_seconds = 0;     // process CPU time (every thread) from the raise to the throw
};

// Runs `request` on `engine`, raises the cancel flag `delay` seconds after `phase` begins (from another thread, as
// the SIGINT handler does), and measures how long generate() takes to throw.
CancelMeasure cancel_during(h3::Engine& engine, h3::Phase phase, double delay) {
  std::atomic<bool> flag{false};
  std::atomic<int> current{-1};
  std::atomic<double> raised_wall{0}, raised_cpu{0};
  std::atomic<bool> raised_in_phase{false};
  std::optional<std::thread> raiser;
  h3::GenerateCallbacks cb;
  cb.cancel = &flag;
  cb.on_progress = [&](const h3::ProgressEvent& e) {
    current = static_cast<int>(e.phase);
    if (e.phase != phase || e.done != 0 || raiser) return;
    raiser.emplace([&, delay] {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      raised_in_phase = current.load() == static_cast<int>(phase);
      raised_cpu = cpu_seconds();
      raised_wall = now_seconds();
      flag = true;
    });
  };
  CancelMeasure m;
  try {
    engine.generate(demo_request(), cb);
  } catch (const h3::Cancelled&) {
    const double wall = now_seconds(), cpu = cpu_seconds();
    if (raiser) raiser->join();
    m.landed = raised_in_phase;
    m.wall_seconds = wall - raised_wall;
    m.cpu_seconds = cpu - raised_cpu;
    return m;
  }
  if (raiser) raiser->join();  // the phase ended before the flag: nothing measured
  return m;
}

}  // namespace

// The target is a cancel within 1 s on the 2-core CPU at the demo's size. The work left when the flag is raised is
// at most one unit between two checks (a DiT block, a conditioner layer, a VAE tile batch's block, an audio VAE
// block, a weight tensor); it is bounded in CPU seconds (all threads), which a loaded CI machine does not inflate
// the way it inflates wall time: 1 s of wall time on 2 idle cores is 2 CPU seconds, and the bound is half that
// (margin 2x). Measured on the 2-core machine, loaded by other builds (about 0.4 cores for this test): load 0.004,
// prompt 0.000, denoise 0.057, video decode 0.076, audio decode 0.020 CPU s after the raise; a whole unit is at
// most about 0.6 CPU s at this size (a DiT block: a pass is 1.2 CPU s for its 2 blocks; a video VAE block of a
// 2-tile batch 0.5). The wall time only has to stay under a bound that catches a cancel ignored until the phase ends
// (10 s: a loaded machine runs this at a fraction of a core, and the phases last up to 7 s here).
TEST(CancelLatency, EveryPhaseStopsWithinTheBoundAtTheDemoSize) {
  constexpr double kCpuBound = 1.0, kWallBound = 10.0;
  // The phases' lengths, from one uncancelled run on a fresh engine (the load is only measured there).
  std::unique_ptr<h3::Engine> calibration = open_tiny_engine();
  const h3::GenerationResult full = calibration->generate(demo_request());
  for (const h3::Phase phase : {h3::Phase::Load, h3::Phase::EncodePrompt, h3::Phase::Denoise,
                                h3::Phase::DecodeVideo, h3::Phase::DecodeAudio}) {
    double length = 0;
    for (const h3::PhaseTiming& t : full.timings)
      if (t.phase == phase) length = t.wall_seconds;
    SCOPED_TRACE(h3::phase_name(phase));
    // Half-way through the phase; closer to its start when it ended first (a short phase on a machine that got
    // faster), down to its start.
    CancelMeasure m;
    for (const double delay : {length / 2, length / 8, 0.0}) {
      std::unique_ptr<h3::Engine> engine = open_tiny_engine();
      if (phase != h3::Phase::Load) engine->load();
      m = cancel_during(*engine, phase, delay);
      if (m.landed) break;
    }
    ASSERT_TRUE(m.landed) << "the flag never landed inside the phase";
    std::printf("[ cancel   ] %-13s phase %.3f s, cancelled after %.3f s wall, %.3f CPU s\n", h3::phase_name(phase),
                length, m.wall_seconds, m.cpu_seconds);
    EXPECT_LE(m.cpu_seconds, kCpuBound);
    EXPECT_LE(m.wall_seconds, kWallBound);
  }
}

TEST(CancelLatency, ACancelledRequestLeavesTheEngineUsable) {
  std::unique_ptr<h3::Engine> engine = open_tiny_engine();
  h3::GenerationRequest small = demo_request();
  small.width = small.height = 64;
  small.frames = 22;
  // Cancelled inside the first pass (the first transformer block's check), then run whole: the same result as on a
  // fresh engine.
  std::atomic<bool> flag{false};
  h3::GenerateCallbacks cb;
  cb.cancel = &flag;
  cb.on_progress = [&](const h3::ProgressEvent& e) {
    if (e.phase == h3::Phase::Denoise && e.done == 0) flag = true;
  };
  EXPECT_THROW(engine->generate(small, cb), h3::Cancelled);
  const h3::GenerationResult after = engine->generate(small);
  const h3::GenerationResult fresh = open_tiny_engine()->generate(small);
  ASSERT_EQ(after.video.numel(), fresh.video.numel());
  EXPECT_EQ(std::memcmp(after.video.data(), fresh.video.data(), after.video.nbytes()), 0);
  EXPECT_EQ(std::memcmp(after.audio.data(), fresh.audio.data(), after.audio.nbytes()), 0);
}

// ================================================================================================================
// The h3 binary: SIGINT at every phase

namespace {

// Every output kind at once, in a fresh folder: an MP4, a WAV and frames in a folder the run creates (two levels).
std::vector<std::string> all_outputs(int frames) {
  return {"-d",       tiny_model(), "--device", "cpu",    "--width",        "128",         "--height",
          "128",      "--frames",   std::to_string(frames), "--steps", "2", "-o", "out.mp4",
          "--wav",    "sound.wav",  "--frames-dir", "frames/run", "-p", "a fox crosses a frozen river"};
}

// The last line of `text` that is not empty before `marker` (empty when there is none).
std::string line_before(const std::string& text, const std::string& marker) {
  std::string before = text.substr(0, text.find(marker));
  while (!before.empty() && before.back() == '\n') before.pop_back();
  return before.substr(before.rfind('\n') == std::string::npos ? 0 : before.rfind('\n') + 1);
}

// A thread of `pid` other than its main one, or 0.
pid_t worker_thread_of(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& e : fs::directory_iterator(dir)) {
    const pid_t tid = static_cast<pid_t>(std::stol(e.path().filename().string()));
    if (tid != pid) return tid;
  }
  return 0;
}

}  // namespace

TEST(CliCancel, SigintInEveryPhaseExits130AndLeavesNothing) {
  // Each phase's first line on stderr; the signal follows it at once (a phase shorter than the signal's way there
  // is cancelled in the next one: the exit and the empty folder are checked either way, and which phase the
  // cancel landed in is printed).
  const std::pair<const char*, const char*> phases[] = {{"load", "h3: loading the model"},
                                                        {"prompt", "h3: encoding the prompt"},
                                                        {"denoise", "denoise [....."},
                                                        {"video decode", "h3: video decode"},
                                                        {"audio decode", "h3: audio decode"},
                                                        {"write: frames", "frames to frames/run"},
                                                        {"write: MP4", "writing the MP4"}};
  for (const auto& [phase, marker] : phases) {
    SCOPED_TRACE(phase);
    const std::string cwd = work_dir("cancel_phase");
    Child c({all_outputs(124), {}, cwd, ""});
    ASSERT_TRUE(c.wait_for_stderr(marker, 300));
    c.signal(SIGINT);
    const Result r = c.finish();
    EXPECT_EQ(r.status, 130) << r.err;
    EXPECT_NE(r.err.find("h3: cancelled; nothing was written."), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("wrote"), std::string::npos) << r.out;
    EXPECT_EQ(files_in(cwd), std::vector<std::string>{}) << "no MP4, WAV, frame, folder or partial file";
    std::printf("[ cancel   ] %-13s the last line before the cancel: %s\n", phase,
                line_before(r.err, "h3: cancelling").c_str());
  }
}

TEST(CliCancel, ACancelDuringTheWritesKeepsWhatWasThere) {
  // An earlier run's outputs at the same paths stay as they were: every output is published only at the end.
  const std::string cwd = work_dir("cancel_keep");
  fs::create_directories(cwd + "/frames/run");
  for (const char* f : {"out.mp4", "sound.wav", "frames/run/frame_00000.ppm", "frames/run/notes.txt"})
    std::ofstream(cwd + "/" + f) << "earlier " << f;
  Child c({all_outputs(124), {}, cwd, ""});
  ASSERT_TRUE(c.wait_for_stderr("writing the MP4", 300));
  c.signal(SIGINT);
  const Result r = c.finish();
  EXPECT_EQ(r.status, 130) << r.err;
  EXPECT_EQ(files_in(cwd), (std::vector<std::string>{"frames", "frames/run", "frames/run/frame_00000.ppm",
                                                     "frames/run/notes.txt", "out.mp4", "sound.wav"}));
  for (const char* f : {"out.mp4", "sound.wav", "frames/run/frame_00000.ppm", "frames/run/notes.txt"})
    EXPECT_EQ(read_file(cwd + "/" + f), std::string("earlier ") + f);
}

TEST(CliCancel, ASecondCtrlCQuitsAtOnceAndRemovesThePartialOutputs) {
  // The WAV goes into a FIFO nobody reads, so the write blocks in open() after the frames are staged; the first
  // SIGINT is delivered to a worker thread, which leaves the main thread blocked (the case a second Ctrl-C is for);
  // the second removes the partial outputs and ends the process by SIGINT.
  const std::string cwd = work_dir("cancel_twice");
  ASSERT_EQ(mkfifo((cwd + "/pipe.wav").c_str(), 0600), 0);
  std::vector<std::string> args = all_outputs(22);
  args[std::find(args.begin(), args.end(), "sound.wav") - args.begin()] = "pipe.wav";
  Child c({args, {}, cwd, ""});
  ASSERT_TRUE(c.wait_for_stderr("writing pipe.wav", 300));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // into the open()
  std::vector<std::string> staged = files_in(cwd);
  EXPECT_GT(staged.size(), 20u) << "the frames are staged under temporary names";
  const pid_t worker = worker_thread_of(c.pid());
  ASSERT_NE(worker, 0) << "h3 runs a thread pool";
  ASSERT_EQ(syscall(SYS_tgkill, c.pid(), worker, SIGINT), 0);
  ASSERT_TRUE(c.wait_for_stderr("h3: cancelling", 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_GT(files_in(cwd).size(), 20u) << "the first Ctrl-C could not reach the blocked write";
  ASSERT_EQ(syscall(SYS_tgkill, c.pid(), worker, SIGINT), 0);
  const Result r = c.finish();
  EXPECT_EQ(r.status, 128 + SIGINT) << r.err;
  EXPECT_NE(r.err.find("h3: quitting at once; partial outputs removed"), std::string::npos) << r.err;
  EXPECT_EQ(files_in(cwd), std::vector<std::string>{"pipe.wav"}) << "only the FIFO that was there";
}

TEST(CliCancel, ACtrlCWhileAFifoBlocksTheWavCancels) {
  // Delivered to the blocked thread, the signal interrupts the open(): cancelled, not an error.
  const std::string cwd = work_dir("cancel_fifo");
  ASSERT_EQ(mkfifo((cwd + "/pipe.wav").c_str(), 0600), 0);
  std::vector<std::string> args = all_outputs(22);
  args[std::find(args.begin(), args.end(), "sound.wav") - args.begin()] = "pipe.wav";
  Child c({args, {}, cwd, ""});
  ASSERT_TRUE(c.wait_for_stderr("writing pipe.wav", 300));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(syscall(SYS_tgkill, c.pid(), c.pid(), SIGINT), 0);  // the main thread, blocked in open()
  const Result r = c.finish();
  EXPECT_EQ(r.status, 130) << r.err;
  EXPECT_NE(r.err.find("h3: cancelled; nothing was written."), std::string::npos) << r.err;
  EXPECT_EQ(files_in(cwd), std::vector<std::string>{"pipe.wav"});
}

TEST(CliCancel, TheSessionGoesBackToItsPromptAfterACancelledWrite) {
  const std::string cwd = work_dir("cancel_session");
  Child c({{"-d", tiny_model(), "--device", "cpu", "--width", "128", "--height", "128", "--frames", "124", "--steps",
            "2"},
           {},
           cwd,
           "a fox crosses a frozen river\n!status\n"});
  ASSERT_TRUE(c.wait_for_stderr("writing the MP4", 300));
  c.signal(SIGINT);
  const Result r = c.finish();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("h3: cancelled; nothing was written."), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("engine: components loaded"), std::string::npos) << "the next command ran:\n" << r.out;
  EXPECT_NE(r.out.find("bye"), std::string::npos) << r.out;
  std::vector<std::string> left;
  for (const std::string& f : files_in(cwd))
    if (f.find("session-") == std::string::npos || f.find('/', f.find("session-")) != std::string::npos)
      left.push_back(f);
  EXPECT_EQ(left, (std::vector<std::string>{"outputs"})) << "only the session's (empty) folder";
}

TEST(PartialPaths, RemovalTakesFilesThenTheFoldersThatEmptied) {
  const std::string dir = work_dir("partial_paths");
  fs::create_directories(dir + "/a/b");
  std::ofstream(dir + "/a/b/f.partial") << "x";
  std::ofstream(dir + "/a/keep") << "y";
  fs::create_directories(dir + "/c/d");
  {
    h3::PartialPath outer(dir + "/a", h3::PartialPath::Kind::Folder), inner(dir + "/a/b", h3::PartialPath::Kind::Folder);
    h3::PartialPath file(dir + "/a/b/f.partial", h3::PartialPath::Kind::File);
    h3::PartialPath c(dir + "/c", h3::PartialPath::Kind::Folder), d(dir + "/c/d", h3::PartialPath::Kind::Folder);
    h3::remove_partial_paths();  // as the second Ctrl-C's handler does (the process would end here)
  }
  // a/ still holds a file that was not partial; c/ and c/d/ emptied, innermost first.
  EXPECT_EQ(files_in(dir), (std::vector<std::string>{"a", "a/keep"}));
}

TEST(PartialPaths, AnOutputFileIsRegisteredUntilItIsCommitted) {
  const std::string dir = work_dir("partial_output_file");
  h3::OutputFile kept(dir + "/kept.bin"), partial(dir + "/partial.bin");
  kept.write("k", 1);
  kept.commit();
  partial.write("p", 1);
  partial.finish();
  EXPECT_EQ(files_in(dir), (std::vector<std::string>{"kept.bin", "partial.bin.partial-" + std::to_string(getpid())}));
  h3::remove_partial_paths();
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"kept.bin"}) << "the committed file is no longer partial";
  EXPECT_THROW(partial.commit(), h3::Error) << "its temporary file is gone";
}

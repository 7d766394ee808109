// The command line's input handling (issue 22, item 9): numbers parsed alike by every numeric flag and session
// command, range errors that name the range, suggestions for a mistyped option, --info refusing what it would
// ignore, echoed values cut and escaped, snapshot paths that are not files named as what they are, and --device cuda
// without a GPU said once.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli_run.h"
#include "text/quote.h"
#include "util/mapped_file.h"

namespace {

using namespace h3_cli_test;

// The first line h3 wrote to stderr, without "h3: ".
std::string first_error(const Result& r) {
  const std::string line = r.err.substr(0, r.err.find('\n'));
  return line.rfind("h3: ", 0) == 0 ? line.substr(4) : line;
}

// A one-shot run refused before anything loads: its exit status 2 and its first sentence.
std::string refusal(std::vector<std::string> extra) {
  // -o '' with the soundtrack into /dev/null: the run writes something, so it gets as far as its refusal.
  std::vector<std::string> args = {"-d", tiny_model(), "--device", "cpu", "-p", "x", "-o", ""};
  args.insert(args.end(), {"--wav", "/dev/null"});
  args.insert(args.end(), extra.begin(), extra.end());
  const Result r = run({args, {}, work_dir("input"), ""});
  EXPECT_EQ(r.status, 2) << r.err;
  return first_error(r);
}

// The session's answers to `commands` (piped in), one line each on stdout or stderr, in order of appearance.
Result session(const std::string& commands, std::vector<std::string> flags = {}) {
  std::vector<std::string> args = {"-d", tiny_model(), "--device", "cpu"};
  args.insert(args.end(), flags.begin(), flags.end());
  return run({args, {}, work_dir("input_session"), commands + "!quit\n"});
}

}  // namespace

TEST(CliInput, RangeErrorsNameTheRange) {
  // Numbers too large for their type: refused by the parser with the range the flag declares.
  EXPECT_EQ(refusal({"--width", "99999999999999999999"}),
            "--width must be between 32 and 32256, got '99999999999999999999'.");
  EXPECT_EQ(refusal({"--frames", "-99999999999999999999"}),
            "--frames must be between 1 and 362, got '-99999999999999999999'.");
  EXPECT_EQ(refusal({"--steps", "1000000000000000000000"}),
            "--steps must be between 2 and 1000, got '1000000000000000000000'.");
  EXPECT_EQ(refusal({"--seconds", "1e400"}), "--seconds must be between 0.021 and 15.083, got '1e400'.");
  EXPECT_EQ(refusal({"--seconds", "1e-400"}), "--seconds must be between 0.021 and 15.083, got '1e-400'.");
  EXPECT_EQ(refusal({"--zoom", "99999999999999999999"}), "--zoom must be between 1 and 16, got '99999999999999999999'.");
  // The session's commands name the same ranges.
  const Result r = session("!steps 99999999999999999999\n!frames 99999999999999999999\n");
  EXPECT_NE(r.err.find("h3: !steps must be between 2 and 1000, got '99999999999999999999'."), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("h3: !frames must be between 1 and 362, got '99999999999999999999'."), std::string::npos)
      << r.err;
}

TEST(CliInput, EveryNumericFlagAndCommandParsesNumbersAlike) {
  // No spaces around the number, no sign other than '-', no other base, no hex float, no inf or nan.
  const std::vector<std::string> not_numbers = {" 64", "64 ", "+64", "0x40", "0x1p3", "inf", "nan", "", "6 4", "1e"};
  for (const char* flag : {"--width", "--height", "--frames", "--steps", "--zoom"})
    for (const std::string& text : not_numbers)
      EXPECT_EQ(refusal({flag, text}), std::string(flag) + " takes a whole number, got '" + text + "'.") << flag;
  for (const std::string& text : not_numbers)
    EXPECT_EQ(refusal({"--seconds", text}), "--seconds takes a number, got '" + text + "'.");
  // A fraction is not a whole number; a subnormal is a number, checked against the range by the engine.
  EXPECT_EQ(refusal({"--width", "64.0"}), "--width takes a whole number, got '64.0'.");
  EXPECT_EQ(refusal({"--seconds", "5e-324"}).rfind("--seconds must give between 1 and 362 frames at 24 fps", 0), 0u);
  // The session's commands use the same parsers (the whole argument is trimmed; !size's parts are not).
  const Result r = session("!size 64 x64\n!frames 0x10\n!seconds 0x1p3\n!seconds inf\n!steps +4\n!zoom 2.0\n"
                           "!seconds 5e-324\n!seconds 1.5e0\n!frames 22\n");
  for (const char* line : {"h3: !size's width takes a whole number, got '64 '.",
                           "h3: !frames takes a whole number, got '0x10'.", "h3: !seconds takes a number, got '0x1p3'.",
                           "h3: !seconds takes a number, got 'inf'.", "h3: !steps takes a whole number, got '+4'.",
                           "h3: !zoom takes a whole number, got '2.0'.", "h3: !seconds must give between 1 and 362"})
    EXPECT_NE(r.err.find(line), std::string::npos) << line << "\n" << r.err;
  EXPECT_NE(r.out.find("frames: 39 (1.62 s at 24 fps)"), std::string::npos) << "1.5e0 s = 36 frames\n" << r.out;
  EXPECT_NE(r.out.find("frames: 22 (0.92 s at 24 fps)"), std::string::npos) << r.out;
  // Valid numbers in every accepted form start a session.
  const Result ok = session("", {"--width", "64", "--height", "96", "--seconds", "1.", "--steps", "3", "--zoom", "2"});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("settings: 64x96, 39 frames (1.62 s), 3 passes"), std::string::npos) << ok.out;
}

TEST(CliInput, AMistypedOptionGetsTheNearestFlag) {
  EXPECT_EQ(refusal({"-width", "64"}), "unknown option '-width'; did you mean --width? (h3 --help lists the options).");
  // A long name after one dash is a slip even where its first letter is a short option (-p, -d, -o).
  EXPECT_EQ(refusal({"-prompt", "x"}), "unknown option '-prompt'; did you mean --prompt? (h3 --help lists the options).");
  EXPECT_EQ(refusal({"-device=cpu"}), "unknown option '-device'; did you mean --device? (h3 --help lists the options).");
  EXPECT_EQ(refusal({"--wdith", "64"}), "unknown option '--wdith'; did you mean --width? (h3 --help lists the options).");
  EXPECT_EQ(refusal({"--stpes=4"}), "unknown option '--stpes'; did you mean --steps? (h3 --help lists the options).");
  EXPECT_EQ(refusal({"--fram", "22"}), "unknown option '--fram'; did you mean --frames? (h3 --help lists the options).");
  EXPECT_EQ(refusal({"-wdith", "64"}), "unknown option '-wdith'; did you mean --width? (h3 --help lists the options).");
  // Nothing near: no suggestion.
  EXPECT_EQ(refusal({"--bogus"}), "unknown option '--bogus'; h3 --help lists the options.");
  EXPECT_EQ(refusal({"-q"}), "unknown option '-q'; h3 --help lists the options.");
  // A short option with its value attached (-dDIR) is still that option.
  const Result r = run({{"-d" + tiny_model(), "--info"}, {}, work_dir("input_short"), ""});
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST(CliInput, InfoRefusesTheOptionsItWouldIgnore) {
  const Result refused =
      run({{"--info", "-d", tiny_model(), "--width", "64", "--steps", "4", "-p", "x", "--width", "96"}, {},
           work_dir("input_info"), ""});
  EXPECT_EQ(refused.status, 2);
  EXPECT_EQ(refused.err,
            "h3: --info only reads the snapshot's headers (-d DIR) and would ignore --width, --steps, --prompt; give "
            "them without --info.\n");
  EXPECT_TRUE(refused.out.empty()) << refused.out;
  const Result device = run({{"--info", "-d", tiny_model(), "--device", "cpu"}, {}, work_dir("input_info"), ""});
  EXPECT_EQ(device.status, 2);
  EXPECT_EQ(first_error(device),
            "--info only reads the snapshot's headers (-d DIR) and would ignore --device; give it without --info.");
  const Result alone = run({{"--info", "-d", tiny_model()}, {}, work_dir("input_info"), ""});
  EXPECT_EQ(alone.status, 0) << alone.err;
  EXPECT_NE(alone.out.find("t2va: yes"), std::string::npos) << alone.out;
}

TEST(CliInput, EchoedValuesAreCutTo80CharactersWithControlsEscaped) {
  // The helper: characters (not bytes) counted, UTF-8 kept whole, controls and broken bytes escaped.
  EXPECT_EQ(h3::quoted_input("64"), "'64'");
  EXPECT_EQ(h3::quoted_input(std::string(100, 'x')), "'" + std::string(80, 'x') + "…'");
  EXPECT_EQ(h3::quoted_input(std::string(80, 'x')), "'" + std::string(80, 'x') + "'");
  EXPECT_EQ(h3::quoted_input("caf\xc3\xa9"), "'caf\xc3\xa9'");
  std::string accents;
  for (int i = 0; i < 81; ++i) accents += "\xc3\xa9";
  EXPECT_EQ(h3::quoted_input(accents), "'" + accents.substr(0, 160) + "…'");
  EXPECT_EQ(h3::quoted_input("a\nb\tc\rd\x1b[31me\x7f"), "'a\\nb\\tc\\rd\\e[31me\\x7F'");
  EXPECT_EQ(h3::quoted_input(std::string("nul\0here", 8)), "'nul\\x00here'");
  EXPECT_EQ(h3::quoted_input("\xff\xc3"), "'\\xFF\\xC3'");
  EXPECT_EQ(h3::quoted_input("\xc2\x9b" "2J"), "'\\u009B2J'");  // C1 CSI
  // In the CLI: a 100 KB argument (near the kernel's limit for one) and an escape sequence.
  const std::string big(100000, '7');
  EXPECT_EQ(refusal({"--width", big}), "--width must be between 32 and 32256, got '" + std::string(80, '7') + "…'.");
  EXPECT_EQ(refusal({"--device", "\x1b]0;owned\x07"}), "--device must be cpu, cuda or auto, got '\\e]0;owned\\x07'.");
  EXPECT_EQ(refusal({"stray\nline"}), "unexpected argument 'stray\\nline'; give the prompt with -p \"...\" (quoted).");
  // In the session: a 10 MB line.
  const Result r = session("!frames " + std::string(10'000'000, 'z') + "\n");
  EXPECT_NE(r.err.find("h3: !frames takes a whole number, got '" + std::string(80, 'z') + "…'."), std::string::npos);
  EXPECT_LT(r.err.size(), 2000u) << "the value is echoed cut, not whole";
}

TEST(CliInput, SnapshotPathsThatAreNotFilesAreNamedAsWhatTheyAre) {
  const std::string cwd = work_dir("input_paths");
  auto fresh_copy = [&](const std::string& name) {
    const std::string dir = cwd + "/" + name;
    fs::copy(tiny_model(), dir, fs::copy_options::recursive);
    return dir;
  };
  auto info = [&](const std::string& dir) { return run({{"--info", "-d", dir}, {}, cwd, ""}); };
  auto expect_named = [&](const std::string& dir, const std::string& sentence) {
    const Result r = info(dir);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(first_error(r), sentence);
    EXPECT_LT(r.seconds, 5.0) << "a FIFO is never opened for reading";
  };
  {
    const std::string m = fresh_copy("folder");
    fs::remove(m + "/transformer/config.json");
    fs::create_directory(m + "/transformer/config.json");
    expect_named(m, m + "/transformer/config.json is a folder; the snapshot needs a regular file there.");
  }
  {
    const std::string m = fresh_copy("fifo");
    fs::remove(m + "/vae/config.json");
    ASSERT_EQ(mkfifo((m + "/vae/config.json").c_str(), 0600), 0);
    expect_named(m, m + "/vae/config.json is a FIFO; the snapshot needs a regular file there.");
  }
  {
    const std::string m = fresh_copy("loop");
    fs::remove(m + "/audio_vae/config.json");
    fs::create_symlink("config.json", m + "/audio_vae/config.json");
    expect_named(m, m + "/audio_vae/config.json is a symbolic link loop; the snapshot needs a regular file there.");
  }
  {
    const std::string m = fresh_copy("zero");
    fs::remove(m + "/text_encoder/config.json");
    fs::create_symlink("/dev/zero", m + "/text_encoder/config.json");
    expect_named(m, m + "/text_encoder/config.json is a character device; the snapshot needs a regular file there.");
  }
  expect_named("/dev/zero", "/dev/zero is a character device, not a model folder (pass the snapshot root with -d).");
  const std::string fifo = cwd + "/model-fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_named(fifo, fifo + " is a FIFO, not a model folder (pass the snapshot root with -d).");
  fs::create_symlink("loop-dir", cwd + "/loop-dir");
  expect_named(cwd + "/loop-dir",
               cwd + "/loop-dir is a symbolic link loop, not a model folder (pass the snapshot root with -d).");
  // The readers below the snapshot refuse them alike, without blocking on a FIFO or reading /dev/zero forever.
  EXPECT_THROW(h3::MappedFile::open(fifo), h3::Error);
  EXPECT_THROW(h3::read_text_file(fifo), h3::Error);
  try {
    h3::read_text_file("/dev/zero");
    ADD_FAILURE() << "/dev/zero was read";
  } catch (const h3::Error& e) {
    EXPECT_EQ(std::string(e.what()), "/dev/zero is a character device, not a file");
  }
  EXPECT_EQ(h3::not_a_regular_file(cwd + "/absent"), "") << "nothing there is the caller's 'missing'";
  EXPECT_EQ(h3::not_a_folder(cwd), "");
}

TEST(CliInput, CudaWithoutAGpuSaysSoOnce) {
  if (h3::cuda_backend_available()) GTEST_SKIP() << "this machine has a usable CUDA device";
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{"-p", "x", "-o", "", "--wav", "/dev/null"}, {}}) {
    std::vector<std::string> args = {"-d", tiny_model(), "--device", "cuda"};
    args.insert(args.end(), mode.begin(), mode.end());
    const Result r = run({args, {}, work_dir("input_cuda"), ""});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(count(r.err, "no usable CUDA device"), 1) << r.err;
    EXPECT_EQ(count(r.err, "\n"), 1) << "one sentence:\n" << r.err;
    EXPECT_NE(r.err.find("--device cpu or auto computes on the CPU"), std::string::npos) << r.err;
  }
}

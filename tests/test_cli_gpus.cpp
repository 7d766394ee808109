// --gpus N / --devices LIST (issue 21) from the command line: the option rules (exit 2, before the engine opens),
// the group's rules against the model and the machine (one sentence from Engine::open, exit 1, nothing loaded), and
// --info's line of GPUs. The tiny model's transformer has 2 attention heads.
#include <gtest/gtest.h>

#include "cli_run.h"

using namespace h3_cli_test;

TEST(CliGpus, OptionRulesAreUsageErrors) {
  const std::string m = tiny_model();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--gpus", "0"}, "--gpus must be between 1 and 16, got 0."},
      {{"--gpus", "17"}, "--gpus must be between 1 and 16, got 17."},
      {{"--gpus", "two"}, "--gpus takes a whole number, got 'two'."},
      {{"--gpus", "2", "--devices", "0,1"}, "--gpus and --devices both choose the GPUs: give one (--gpus N is "
                                            "--devices 0,...,N-1)."},
      {{"--devices", "1,1"}, "--devices lists GPU 1 twice: each rank needs a GPU of its own."},
      {{"--devices", "0,,1"}, "--devices takes device ordinals separated by commas (e.g. 0,1), got '0,,1'."},
      {{"--devices", "-1"}, "--devices must be between 0 and 1023, got '-1'."},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"-d", m, "-p", "x"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Result r = run({args, {}, work_dir("gpus"), ""});
    EXPECT_EQ(r.status, 2) << c.message << "\n" << r.err;
    EXPECT_NE(r.err.find("h3: " + c.message), std::string::npos) << r.err;
  }
}

TEST(CliGpus, TheGroupsRulesAreOneSentenceBeforeLoading) {
  const std::string m = tiny_model();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--gpus", "4"}, "--gpus 4: the transformer's 2 attention heads are split evenly across the GPUs, so the "
                        "number of GPUs must divide them and be at most 16: one of 1, 2"},
      {{"--devices", "1,0", "--device", "cpu"}, "--devices 1,0: the transformer runs on several GPUs with the CUDA "
                                                "backend only (the CPU backend computes on one rank)"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"-d", m, "-p", "x"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const std::string cwd = work_dir("gpus");
    const Result r = run({args, {}, cwd, ""});
    EXPECT_EQ(r.status, 1) << c.message << "\n" << r.err;
    EXPECT_NE(r.err.find("h3: " + c.message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("loading"), std::string::npos) << r.err;
    EXPECT_TRUE(files_in(cwd).empty());
  }
}

TEST(CliGpus, InfoListsTheGpusAndHelpTheOptions) {
  const Result info = run({{"--info", "-d", tiny_model()}, {}, work_dir("gpus"), ""});
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("GPUs for --gpus / --devices (NCCL "), std::string::npos) << info.out;
  const Result help = run({{"--help"}, {}, work_dir("gpus"), ""});
  EXPECT_NE(help.out.find("--gpus N"), std::string::npos);
  EXPECT_NE(help.out.find("--devices LIST"), std::string::npos);
}

// The h3 binary for scripts and integrators: --version, --info's first lines and --info --json, the --json result
// line, --quiet, the settings every MP4 carries in its metadata, the seed of a random-seed video in the 'wrote' line
// and in the session's !status, and the outputs refused before anything is opened.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

extern "C" {
#include <libavformat/avformat.h>
}

#include "cli_run.h"
#include "h3/version.h"
#include "media/ppm_writer.h"
#include "media/video_frames.h"

using namespace h3_cli_test;
using nlohmann::json;

namespace {

// The format's tags, as ffprobe lists them (empty when the file is not a media file).
std::map<std::string, std::string> mp4_tags(const std::string& path) {
  std::map<std::string, std::string> tags;
  AVFormatContext* fmt = nullptr;
  if (avformat_open_input(&fmt, path.c_str(), nullptr, nullptr) != 0) return tags;
  const AVDictionaryEntry* e = nullptr;
  while ((e = av_dict_get(fmt->metadata, "", e, AV_DICT_IGNORE_SUFFIX))) tags[e->key] = e->value;
  avformat_close_input(&fmt);
  return tags;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

void write_picture(const std::string& path) {
  h3::Rgb8Image im;
  im.width = 64;
  im.height = 64;
  im.rgb.assign(64 * 64 * 3, 0);
  for (size_t i = 0; i < im.rgb.size(); ++i) im.rgb[i] = static_cast<uint8_t>(i * 13);
  h3::write_ppm(path, im);
}

}  // namespace

TEST(CliScripting, VersionNamesTheVersionTheCommitAndTheBackends) {
  const Result r = run({{"--version"}, {}, work_dir("version"), ""});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> out = lines(r.out);
  ASSERT_GE(out.size(), 2u) << r.out;
  EXPECT_EQ(out[0], "h3 " + h3::build_info().version + " (commit " + h3::build_info().commit + ")");
  EXPECT_TRUE(std::regex_match(out[0], std::regex(R"(h3 \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\))")))
      << out[0];
#ifdef H3_HAVE_CUDA
  EXPECT_NE(r.out.find("GPU architectures compiled in: sm_"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cuBLASLt "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cuDNN "), std::string::npos) << r.out;
#else
  EXPECT_EQ(out[1], "backends: cpu (this build has no CUDA backend: no GPU architectures compiled in)");
#endif
  // --info begins with the same lines.
  const Result info = run({{"--info", "-d", tiny_model()}, {}, work_dir("version"), ""});
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_EQ(info.out.rfind(r.out, 0), 0u) << info.out;
}

TEST(CliScripting, InfoJsonIsOneParsableObject) {
  const Result r = run({{"--info", "--json", "-d", tiny_model()}, {}, work_dir("info_json"), ""});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(lines(r.out).size(), 1u) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("h3").at("version"), h3::build_info().version);
  EXPECT_EQ(j.at("snapshot"), tiny_model());
  EXPECT_TRUE(j.at("problems").empty());
  std::map<std::string, bool> present;
  for (const json& c : j.at("components")) present[c.at("name")] = c.at("present");
  EXPECT_TRUE(present.at("transformer"));
  EXPECT_TRUE(present.at("audio_vae"));
  std::map<std::string, bool> available;
  for (const json& w : j.at("workflows")) available[w.at("name")] = w.at("available");
  EXPECT_EQ(available, (std::map<std::string, bool>{{"fl2va", true}, {"ref2va", true}, {"t2va", true}}));
  EXPECT_FALSE(j.at("device").at("description").get<std::string>().empty());
}

// stdout holds the JSON line alone; its seed is the one the MP4 and the 'wrote' line give.
TEST(CliScripting, JsonResultLineWithTheRandomSeed) {
  const std::string cwd = work_dir("json");
  const Result r = run({small({"-p", "a kite", "--seed", "random", "-o", "kite.mp4", "--wav", "kite.wav", "--json"}),
                        {},
                        cwd,
                        ""});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(lines(r.out).size(), 1u) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("path"), "kite.mp4");
  EXPECT_EQ(j.at("wav"), "kite.wav");
  EXPECT_TRUE(j.at("frames_dir").is_null());
  EXPECT_EQ(j.at("workflow"), "t2va");
  EXPECT_EQ(j.at("width"), 64);
  EXPECT_EQ(j.at("height"), 64);
  EXPECT_EQ(j.at("frames"), 22);
  EXPECT_EQ(j.at("passes"), 2);
  for (const char* phase : {"prompt", "denoise", "video_decode", "audio_decode", "write", "total"})
    EXPECT_GT(j.at("timings").at(phase).get<double>(), 0) << phase;
  const std::string seed = std::to_string(j.at("seed").get<uint64_t>());
  EXPECT_EQ(mp4_tags(cwd + "/kite.mp4").at("h3_seed"), seed);
  EXPECT_NE(r.err.find("wrote kite.mp4 (64x64, 22 frames = 0.92 s, H.264 + AAC 32 kHz stereo, seed " + seed + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("wrote kite.wav (32 kHz stereo WAV, seed " + seed + ")"), std::string::npos) << r.err;
}

TEST(CliScripting, QuietPrintsErrorsOnly) {
  const std::string cwd = work_dir("quiet");
  Result r = run({small({"-p", "a kite", "-o", "kite.mp4", "--quiet"}), {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(mp4_tags(cwd + "/kite.mp4").at("h3_frames"), "22");
  r = run({small({"-p", "a kite", "-o", "kite2.mp4", "--quiet", "--steps", "1"}), {}, cwd, ""});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "h3: --steps (model passes) must be between 2 and 1000, got 1.\n");
  // --json still prints its line.
  r = run({small({"-p", "a kite", "-o", "kite3.mp4", "--quiet", "--json"}), {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(json::parse(r.out).at("path"), "kite3.mp4");
}

// Every setting the video was made from, for each workflow: the prompt, seed, passes, canvas, frames, keyframes
// and references by file name, and the version.
TEST(CliScripting, EveryMp4CarriesItsSettings) {
  const std::string cwd = work_dir("metadata");
  write_picture(cwd + "/k.ppm");
  const std::string prompt = "The fox of <Picture 1>, \"quoted\"; ünïcode — and a new\nline.";
  Result r = run({small({"-p", prompt, "--seed", "77", "--ref-image", "k.ppm", "-o", "refs.mp4"}), {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  std::map<std::string, std::string> tags = mp4_tags(cwd + "/refs.mp4");
  EXPECT_EQ(tags.at("h3_prompt"), prompt);
  EXPECT_EQ(tags.at("description"), prompt);
  EXPECT_EQ(tags.at("h3_seed"), "77");
  EXPECT_EQ(tags.at("h3_passes"), "2");
  EXPECT_EQ(tags.at("h3_canvas"), "64x64");
  EXPECT_EQ(tags.at("h3_frames"), "22");
  EXPECT_EQ(tags.at("h3_workflow"), "ref2va");
  EXPECT_EQ(tags.at("h3_reference_1"), "image k.ppm");
  EXPECT_EQ(tags.at("h3_reference_image_size"), "max");
  EXPECT_EQ(tags.at("h3_version"), h3::build_info().version + " (commit " + h3::build_info().commit + ")");
  EXPECT_EQ(tags.at("comment"), "MiniMax-H3 ref2va by h3 " + h3::build_info().version +
                                    ": 64x64, 22 frames, 2 passes, seed 77");
  r = run({small({"-p", "the fox", "--first-frame", "k.ppm", "--last-frame", "k.ppm", "-o", "keys.MOV"}), {}, cwd,
           ""});
  ASSERT_EQ(r.status, 0) << r.err;
  tags = mp4_tags(cwd + "/keys.MOV");
  EXPECT_EQ(tags.at("h3_workflow"), "fl2va");
  EXPECT_EQ(tags.at("h3_first_frame"), "k.ppm");
  EXPECT_EQ(tags.at("h3_last_frame"), "k.ppm");
  EXPECT_EQ(tags.count("h3_reference_1"), 0u);
}

// The speed controls that were set are in the metadata too (the request JSON's names); the exact path adds none.
TEST(CliScripting, EveryMp4CarriesTheSpeedControlsThatWereSet) {
  const std::string cwd = work_dir("metadata_speed");
  const std::string controls[] = {"h3_reuse",       "h3_core_reuse",    "h3_layers",
                                  "h3_token_reduction", "h3_render_canvas", "h3_use_reference_rope"};
  Result r = run({small({"-p", "the fox", "-o", "exact.mp4"}), {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  std::map<std::string, std::string> tags = mp4_tags(cwd + "/exact.mp4");
  ASSERT_EQ(tags.at("h3_canvas"), "64x64");
  for (const std::string& key : controls) EXPECT_EQ(tags.count(key), 0u) << key;

  r = run({small({"-p", "the fox", "--steps", "4", "--reuse", "2", "--layers", "2", "--token-reduction",
                  "--render-width", "32", "--render-height", "32", "--use-reference-rope", "-o", "fast.mp4"}),
           {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  tags = mp4_tags(cwd + "/fast.mp4");
  EXPECT_EQ(tags.at("h3_reuse"), "2");
  EXPECT_EQ(tags.at("h3_layers"), "2");
  EXPECT_EQ(tags.at("h3_token_reduction"), "on");
  EXPECT_EQ(tags.at("h3_render_canvas"), "32x32");
  EXPECT_EQ(tags.at("h3_use_reference_rope"), "on");
  EXPECT_EQ(tags.at("h3_canvas"), "64x64");  // the output canvas: the frames were upscaled to it
  EXPECT_EQ(tags.count("h3_core_reuse"), 0u);

  // --core-reuse (exclusive with --reuse); a render canvas equal to the output's was still set.
  r = run({small({"-p", "the fox", "--core-reuse", "3", "--render-width", "64", "--render-height", "64", "-o",
                  "core.mp4"}),
           {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  tags = mp4_tags(cwd + "/core.mp4");
  EXPECT_EQ(tags.at("h3_core_reuse"), "3");
  EXPECT_EQ(tags.at("h3_render_canvas"), "64x64");
  for (const char* key : {"h3_reuse", "h3_layers", "h3_token_reduction", "h3_use_reference_rope"})
    EXPECT_EQ(tags.count(key), 0u) << key;
}

// Refused before the model folder is even looked at (it does not exist here), with the sentence; nothing written.
TEST(CliScripting, OutputsThatAreNoMp4OrNothingAreRefusedBeforeLoading) {
  const std::string cwd = work_dir("refused");
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"-o", "out.avi"}, "h3: -o 'out.avi' must end in .mp4, .mov or .m4v: h3 writes an MP4 (H.264 + AAC).\n"},
      {{"-o", "out.MKV"}, "h3: -o 'out.MKV' must end in .mp4, .mov or .m4v: h3 writes an MP4 (H.264 + AAC).\n"},
      {{"-o", "mp4"}, "h3: -o 'mp4' must end in .mp4, .mov or .m4v: h3 writes an MP4 (H.264 + AAC).\n"},
      {{"-o", ""},
       "h3: -o '' writes no MP4, and without --frames-dir DIR or --wav PATH the run would write nothing; give an "
       "MP4 name or one of them.\n"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> a = {"-d", "no-model-here", "-p", "a fox"};
    a.insert(a.end(), args.begin(), args.end());
    const Result r = run({a, {}, cwd, ""});
    EXPECT_EQ(r.status, 2) << args[1];
    EXPECT_EQ(r.err, message);
    EXPECT_EQ(r.out, "");
  }
  EXPECT_TRUE(files_in(cwd).empty());
  // In a session they do not apply.
  for (const std::string flag : {"--json", "--quiet"}) {
    const Result r = run({{"-d", tiny_model(), flag}, {}, cwd, ""});
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err, "h3: " + flag + " applies to a one-shot run (-p PROMPT)" +
                         (flag == "--json" ? " and to --info" : "") + "; the session talks on its terminal.\n");
  }
  // --info has nothing to keep quiet about: --quiet is one of the options it would ignore.
  const Result info = run({{"--info", "--quiet", "-d", tiny_model()}, {}, cwd, ""});
  EXPECT_EQ(info.status, 2);
  EXPECT_NE(info.err.find("would ignore --quiet"), std::string::npos) << info.err;
}

TEST(CliScripting, SessionStatusShowsTheLastRandomSeed) {
  const std::string cwd = work_dir("session_seed");
  const Result r = run({small({"--seed", "random"}), {}, cwd, "!status\na kite\n!status\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(wrote (\S+) \(64x64, 22 frames .*, seed (\d+)\))"))) << r.out;
  const std::string seed = m[2];
  EXPECT_NE(r.out.find("passes, seed random, show off"), std::string::npos) << "before any video: " << r.out;
  EXPECT_NE(r.out.find("passes, seed random (the last video's: " + seed + "), show off"), std::string::npos) << r.out;
  EXPECT_EQ(mp4_tags(cwd + "/" + std::string(m[1])).at("h3_seed"), seed);
}

// The h3 command line: one table of option descriptors drives parsing and the --help text.
//
// Parsing checks syntax only (known flag, value present, value a number, a flag's own range such as --zoom); the
// request's ranges (canvas, frames, steps) are the engine's: h3::Engine::validate, which knows the model's canvas
// multiple, runs before any weight is loaded.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backend/memory_budget.h"
#include "h3/h3.h"
#include "parallel/sequence_parallel.h"
#include "pipeline/geometry.h"

namespace h3::app {

// A command-line mistake: main prints it and exits with status 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& msg) : Error(msg) {}
};

// `frames` at kFps as seconds with two decimals ("5.17").
std::string seconds_text(int64_t frames);

// The terminal preview zoom range (write_terminal_image accepts 1..16).
constexpr int kMinZoom = 1;
constexpr int kMaxZoom = 16;

struct CliOptions {
  std::string model_dir;
  std::optional<std::string> prompt;  // absent: interactive session
  std::optional<std::string> output;  // -o; "" = no MP4; absent = the next free outputs/h3-NNNN.mp4
  GenerationRequest request;          // canvas, frames/seconds, steps, seed (the prompt is set from `prompt`)
  bool random_seed = false;           // --seed random
  std::string frames_dir;             // --frames-dir
  std::string wav;                    // --wav
  std::string device = "auto";
  std::string precision = "bf16";  // --precision (pipeline/precision.h)
  std::optional<double> memory_budget_gb;  // --memory-budget
  std::vector<int> gpus;                   // --gpus N (0..N-1) or --devices LIST; empty: one device
  bool ssd_streaming = false;              // --ssd-streaming
  bool show = false;
  int zoom = 1;
  bool profile = false;
  bool info = false;
  bool help = false;
  bool version = false;  // --version
  bool json = false;     // --json: the result (or --info's report) as one JSON line on stdout
  bool quiet = false;    // --quiet: errors only
  std::vector<std::string> given;  // the long names of the options given, in order
  bool was_given(const std::string& long_name) const;
};

// Parses argv[1..argc). Throws UsageError naming the first problem.
CliOptions parse_command_line(int argc, char** argv);

// The complete --help text (every option, its range and default; the options not yet available).
std::string help_text();

// The options that only make sense for a one-shot run (-p): an interactive session rejects them.
const std::vector<std::string>& one_shot_only_options();

// The ordered references of ref2va: one table for the command line (--NAME) and the session (!NAME), so both build
// and check a reference alike.
struct ReferenceOption {
  std::string name;  // "ref-image": the flag --ref-image, the session command !ref-image
  ReferenceInput::Kind kind;
  ReferenceInput::Soundtrack soundtrack;
  std::string help;
  std::string value() const;  // the placeholder: "PATH", or "VIDEO AUDIO" for a replaced soundtrack
};
const std::vector<ReferenceOption>& reference_options();
// The reference `option` adds for `path` (and, for a replaced soundtrack, `soundtrack_path`). Throws UsageError
// naming `what` (the flag or the command) when a file is missing: "--ref-image needs a file.".
ReferenceInput make_reference(const ReferenceOption& option, const std::string& what, const std::string& path,
                              const std::string& soundtrack_path = {});
// "max" or "match" (--ref-image-size, !ref-image-size).
ReferenceImageSize parse_reference_image_size(const std::string& what, const std::string& text);
// One reference for a listing: "image a.png", "video v.mp4 with its soundtrack", "video v.mp4 without its
// soundtrack", "video v.mp4 with the soundtrack of a.wav", "audio a.wav".
std::string describe_reference(const ReferenceInput& r);

// The numbers of every numeric option and session command, parsed alike: the whole text is the number, in decimal
// ("-" allowed; no "+", no spaces around it, no hex, no "inf" or "nan"); a syntax error is "<what> takes a whole
// number, got '...'." (or "a number"). `what` names the value in the sentence ("--width", "!frames").
//
// A value's range is checked where its rule lives: the request's (--width, --frames, --steps, --seconds) by the
// engine before any weight loads (h3::Engine::validate, which knows the model's canvas multiple); the CLI's own
// (--zoom, !ref-remove) here. A number its type cannot hold (beyond int64, or a double's range) never reaches a
// check, so the parser refuses it with the range its option declares: "<what> must be between MIN and MAX, got
// '...'.".
struct IntegerRange {
  int64_t min, max;
};
struct NumberRange {
  double min, max;
};
// The ranges of the request's numbers as the released model takes them (the engine's rules are finer: a side is a
// multiple of the model's canvas multiple, the canvas at most kMaxCanvasArea pixels).
inline constexpr IntegerRange kSideRange{kCanvasMultiple, kMaxCanvasArea / kCanvasMultiple};
inline constexpr IntegerRange kFramesRange{1, kMaxFrames};
inline constexpr IntegerRange kStepsRange{kMinSteps, kMaxSteps};
inline constexpr NumberRange kSecondsRange{0.5 / kFps, static_cast<double>(kMaxFrames) / kFps};
inline constexpr IntegerRange kZoomRange{kMinZoom, kMaxZoom};
// --layers: the release's 50 blocks, from seven tenths (the engine states the rule for the model at hand).
inline constexpr IntegerRange kLayersRange{35, 50};
inline constexpr IntegerRange kCoreReuseRange{1, kMaxCoreReuse};
inline constexpr IntegerRange kReuseRange{kMinReuse, kMaxReuse};
inline constexpr NumberRange kMemoryBudgetRange{kMemoryBudgetMinGb, kMemoryBudgetMaxGb};
inline constexpr NumberRange kSparsityRange{0.0, 1.0};  // [0, 1): request validation excludes 1
// --gpus: one rank per GPU (parallel/sequence_parallel.h; the engine checks the degree against the transformer's
// heads and the devices the machine has). --devices: each ordinal in kDeviceRange, each once, at most kGpusRange.max.
inline constexpr IntegerRange kGpusRange{1, kMaxSequenceParallelRanks};
inline constexpr IntegerRange kDeviceRange{0, 1023};
// "0,1,3" (--devices): the ordinals in order. Throws UsageError naming the rule.
std::vector<int> parse_device_list(const std::string& what, const std::string& text);
// --attention's value ("dense" or "sparse"); anything else is a UsageError naming both.
AttentionChoice parse_attention_choice(const std::string& what, const std::string& text);

int64_t parse_integer(const std::string& what, const std::string& text, IntegerRange range);
double parse_number(const std::string& what, const std::string& text, NumberRange range);
// parse_integer, then the range itself: for a value whose rule is the CLI's own.
int64_t parse_integer_in(const std::string& what, const std::string& text, IntegerRange range);
// "random" or a uint64; returns nullopt for random.
std::optional<uint64_t> parse_seed(const std::string& what, const std::string& text);
// A fresh seed for --seed random / !seed random.
uint64_t draw_random_seed();
int parse_zoom(const std::string& what, const std::string& text);

}  // namespace h3::app

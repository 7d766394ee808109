// The h3 command line: one table of option descriptors drives parsing, the --help text and the rejection of
// options that later releases add (listed under "Not yet available", refused with a sentence, never ignored).
//
// Parsing checks syntax only (known flag, value present, value a number, a flag's own range such as --zoom); the
// request's ranges (canvas, frames, steps) are the engine's: h3::Engine::validate, which knows the model's canvas
// multiple, runs before any weight is loaded.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "h3/h3.h"

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
  bool show = false;
  int zoom = 1;
  bool profile = false;
  bool info = false;
  bool help = false;
  std::vector<std::string> given;  // the long names of the options given, in order
  bool was_given(const std::string& long_name) const;
};

// Parses argv[1..argc). Throws UsageError naming the first problem.
CliOptions parse_command_line(int argc, char** argv);

// The complete --help text (every option, its range and default; the options not yet available).
std::string help_text();

// The options that only make sense for a one-shot run (-p): an interactive session rejects them.
const std::vector<std::string>& one_shot_only_options();

// Integer and number parsing shared with the interactive session: the whole text must be the number.
// `what` names the value in the error ("--width", "!frames").
int64_t parse_integer(const std::string& what, const std::string& text);
double parse_number(const std::string& what, const std::string& text);
// "random" or a uint64; returns nullopt for random.
std::optional<uint64_t> parse_seed(const std::string& what, const std::string& text);
// A fresh seed for --seed random / !seed random.
uint64_t draw_random_seed();
int parse_zoom(const std::string& what, const std::string& text);

}  // namespace h3::app

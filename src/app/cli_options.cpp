#include "app/cli_options.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <random>
#include <string_view>

#include "models/dit/dit_fasth3.h"
#include "pipeline/geometry.h"
#include "pipeline/precision.h"
#include "text/quote.h"
#include "tools/tool_args.h"

namespace h3::app {

namespace {

enum class Section { Model, Prompt, Keyframes, References, Canvas, Sampling, Speed, Diagnostics };

struct OptionSpec {
  std::string name;      // long name, without "--"
  char short_name = 0;   // 0: none
  std::string value;     // the value's placeholder; empty for a switch
  std::string help;      // one paragraph; --help wraps it
  Section section;
  // Parses and stores the value (ignored for a switch).
  std::function<void(CliOptions&, const std::string& value)> apply;
  // Options of two values (`value` names both, e.g. "VIDEO AUDIO"): stores them; `apply` is then unused.
  std::function<void(CliOptions&, const std::string& first, const std::string& second)> apply_pair;
};


const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = [] {
    std::vector<OptionSpec> t;
    auto add = [&](std::string name, char short_name, std::string value, std::string help, Section s,
                   std::function<void(CliOptions&, const std::string&)> apply) {
      t.push_back({std::move(name), short_name, std::move(value), std::move(help), s, std::move(apply), nullptr});
    };
    // A numeric option: its value parsed by parse_integer / parse_number (cli_options.h) against its declared range,
    // then stored by `set`.
    auto integer = [&](std::string name, std::string value, std::string help, Section s, IntegerRange range,
                       std::function<void(CliOptions&, int64_t)> set) {
      const std::string flag = "--" + name;
      add(std::move(name), 0, std::move(value), std::move(help), s,
          [=](CliOptions& o, const std::string& v) { set(o, parse_integer(flag, v, range)); });
    };
    auto number = [&](std::string name, std::string value, std::string help, Section s, NumberRange range,
                      std::function<void(CliOptions&, double)> set) {
      const std::string flag = "--" + name;
      add(std::move(name), 0, std::move(value), std::move(help), s,
          [=](CliOptions& o, const std::string& v) { set(o, parse_number(flag, v, range)); });
    };
    // An ordered reference (ref2va): appended in command-line order, as the session's !NAME appends it.
    auto reference = [&](const ReferenceOption& r) {
      const std::string flag = "--" + r.name;
      if (r.soundtrack == ReferenceInput::Soundtrack::Replaced) {
        t.push_back({r.name, 0, r.value(), r.help, Section::References, nullptr,
                     [=](CliOptions& o, const std::string& video, const std::string& audio) {
                       o.request.references.push_back(make_reference(r, flag, video, audio));
                     }});
      } else {
        add(r.name, 0, r.value(), r.help, Section::References, [=](CliOptions& o, const std::string& v) {
          o.request.references.push_back(make_reference(r, flag, v));
        });
      }
    };
    // ---- model and device
    add("model-dir", 'd', "DIR",
        "the MiniMax-H3 snapshot folder (a Hugging Face download of MiniMaxAI/MiniMax-H3; "
        "`h3 tool make-tiny-model DIR` writes a tiny random-weight one to try things on)",
        Section::Model, [](CliOptions& o, const std::string& v) { o.model_dir = v; });
    add("device", 0, "cpu|cuda|auto", "where to compute (default auto: CUDA when a GPU is usable, else the CPU)",
        Section::Model, [](CliOptions& o, const std::string& v) {
          if (const auto problem = check_device_option(v)) throw UsageError(*problem + ".");
          o.device = v;
        });
    add("precision", 0, "bf16|fp8",
        "the transformer blocks' products: bf16 (default, the exact path) or fp8 (FP8 E4M3 weights and activations "
        "with per-channel scales, half the blocks' memory; CUDA on compute capability 8.9 or newer only; on Hopper "
        "the blocks' attention in FP8 too, H3_DISABLE_FP8_ATTENTION=1 keeps it bf16)",
        Section::Model, [](CliOptions& o, const std::string& v) {
          if (const auto problem = check_precision_word("--precision", v)) throw UsageError(*problem + ".");
          o.precision = v;
        });
    number("memory-budget", "GB",
           cat("use at most GB (decimal: 10^9 bytes) of device memory, ", kMemoryBudgetMinGb, "..", kMemoryBudgetMaxGb,
               " (default: H3_DEVICE_MEMORY_LIMIT if set, else the device's free memory); no allocation passes it, "
               "and the residency plan is chosen to fit it: everything resident, else each model resident only in "
               "its phase, else the transformer's blocks streamed from pinned host memory (--info and --profile "
               "name the plan)"),
           Section::Model, kMemoryBudgetRange, [](CliOptions& o, double v) {
             // The CLI's own rule (the engine takes any byte count).
             if (v < kMemoryBudgetRange.min || v > kMemoryBudgetRange.max)
               throw UsageError(cat("--memory-budget must be between ", kMemoryBudgetRange.min, " and ",
                                    kMemoryBudgetRange.max, " GB, got ", v, "."));
             o.memory_budget_gb = v;
           });
    const auto one_gpu_option = [](const CliOptions& o) {
      if (!o.gpus.empty())
        throw UsageError("--gpus and --devices both choose the GPUs: give one (--gpus N is --devices 0,...,N-1).");
    };
    integer("gpus", "N",
            cat("run the transformer on GPUs 0..N-1, one sequence-parallel rank each (Ulysses: rows split across "
                "them, attention heads split inside attention), ", kGpusRange.min, "..", kGpusRange.max,
                " dividing the transformer's attention heads (56: 1, 2, 4, 7, 8 or 14); default 1"),
            Section::Model, kGpusRange, [one_gpu_option](CliOptions& o, int64_t v) {
              if (v < kGpusRange.min || v > kGpusRange.max)
                throw UsageError(cat("--gpus must be between ", kGpusRange.min, " and ", kGpusRange.max, ", got ", v,
                                     "."));
              one_gpu_option(o);
              for (int d = 0; d < v; ++d) o.gpus.push_back(d);
            });
    add("devices", 0, "LIST", "as --gpus, on the CUDA devices listed (e.g. 0,2: ordinals, each once)",
        Section::Model, [one_gpu_option](CliOptions& o, const std::string& v) {
          one_gpu_option(o);
          o.gpus = parse_device_list("--devices", v);
        });
    add("info", 0, "", "what the snapshot holds, which workflows it serves and the device; reads headers only",
        Section::Model, [](CliOptions& o, const std::string&) { o.info = true; });
    add("version", 0, "", "h3's version and commit, the CUDA, cuBLASLt and cuDNN versions, the GPU architectures "
        "compiled in", Section::Model, [](CliOptions& o, const std::string&) { o.version = true; });
    // ---- prompt and output
    add("prompt", 'p', "TEXT", "the prompt; without -p, h3 starts an interactive session (!help lists its commands)",
        Section::Prompt, [](CliOptions& o, const std::string& v) { o.prompt = v; });
    add("output", 'o', "PATH",
        "the MP4 to write (H.264 video + AAC stereo soundtrack), a regular file named .mp4, .mov or .m4v whose "
        "folder exists (an MP4 cannot be streamed into a FIFO or a device). Default: the next free "
        "outputs/h3-NNNN.mp4 (never overwrites); -o '' writes no MP4 (then give --frames-dir or --wav)",
        Section::Prompt, [](CliOptions& o, const std::string& v) { o.output = v; });
    add("frames-dir", 0, "DIR", "also write every frame as DIR/frame_00000.ppm, ... (binary PPM; DIR is created)",
        Section::Prompt, [](CliOptions& o, const std::string& v) {
          if (v.empty()) throw UsageError("--frames-dir needs a folder name.");
          o.frames_dir = v;
        });
    add("wav", 0, "PATH",
        "also write the soundtrack as a WAV (16-bit stereo, 32 kHz, cut to the video's length); a FIFO or a device "
        "(/dev/stdout) is written straight into",
        Section::Prompt, [](CliOptions& o, const std::string& v) {
          if (v.empty()) throw UsageError("--wav needs a file name.");
          o.wav = v;
        });
    // ---- keyframes (fl2va)
    add("first-frame", 0, "IMAGE",
        "start the video from this picture (PNG, JPEG, WebP, BMP, TIFF): the fl2va workflow. Without --width/"
        "--height the canvas follows its aspect ratio (1:4 to 4:1); it is stretched onto the canvas",
        Section::Keyframes, [](CliOptions& o, const std::string& v) {
          if (v.empty()) throw UsageError("--first-frame needs an image file.");
          o.request.first_frame = ImageInput::file(v);
        });
    add("last-frame", 0, "IMAGE",
        "end the video on this picture (alone, or with --first-frame: then it is scaled to cover the canvas and "
        "centre-cropped). Keyframes cannot be combined with references",
        Section::Keyframes, [](CliOptions& o, const std::string& v) {
          if (v.empty()) throw UsageError("--last-frame needs an image file.");
          o.request.last_frame = ImageInput::file(v);
        });
    // ---- references (ref2va), in command-line order
    for (const ReferenceOption& r : reference_options()) reference(r);
    add("ref-image-size", 0, "max|match",
        "how reference pictures are sized: max (default, the reference's: short edge at the snapshot's "
        "reference_image_short_edge, 2048 for the release, upscaling included) or match (down only, area-capped)",
        Section::References, [](CliOptions& o, const std::string& v) {
          o.request.reference_image_size = parse_reference_image_size("--ref-image-size", v);
        });
    // ---- canvas and duration
    integer("width", "W", cat("video width in pixels (default ", kDefaultWidth, ")"), Section::Canvas, kSideRange,
            [](CliOptions& o, int64_t v) { o.request.width = v; });
    integer("height", "H",
            cat("video height in pixels (default ", kDefaultHeight, "). Width and height are multiples of ",
                kCanvasMultiple, " (the model's canvas multiple), at least ", kCanvasMultiple,
                ", and width x height <= 768 x 1344 pixels"),
            Section::Canvas, kSideRange, [](CliOptions& o, int64_t v) { o.request.height = v; });
    integer("frames", "N",
            cat("video frames at ", kFps, " fps, 1..", kMaxFrames, ", rounded up to the next 17·n + 5 (the video VAE's ",
                "temporal shape): ", kMinFrames, ", 22, 39, ..., ", kMaxFrames, " (", seconds_text(kMaxFrames),
                " s). Default ", kDefaultFrames, " = ", seconds_text(kDefaultFrames), " s"),
            Section::Canvas, kFramesRange, [](CliOptions& o, int64_t v) { o.request.frames = v; });
    number("seconds", "S",
           cat("duration instead of --frames (not both): round(S·", kFps, ") frames, rounded up as above; ",
               "up to ", seconds_text(kMaxFrames), " s, fractions allowed"),
           Section::Canvas, kSecondsRange, [](CliOptions& o, double v) { o.request.seconds = v; });
    // ---- sampling
    integer("steps", "N",
            cat("denoising passes (model evaluations), ", kMinSteps, "..", kMaxSteps, " (default ", kDefaultSteps,
                "; a FastH3 student's grid: ", checkpoint_default_passes(true, kDefaultSteps),
                "). N passes = the reference pipeline's num_inference_steps N + 1 (it counts schedule points)"),
            Section::Sampling, kStepsRange, [](CliOptions& o, int64_t v) { o.request.steps = v; });
    add("seed", 0, "S|random",
        cat("the noise seed, 0..18446744073709551615, or random (default ", kDefaultSeed,
            "); the same seed and settings give the same video"),
        Section::Sampling, [](CliOptions& o, const std::string& v) {
          const std::optional<uint64_t> s = parse_seed("--seed", v);
          o.random_seed = !s;
          if (s) o.request.seed = *s;
        });
    // ---- speed controls (h3.c's; the defaults are the exact path)
    integer("reuse", "N",
        cat("evaluate the model at the first and the last pass and every N-th pass between, ", kMinReuse, "..",
            kMaxReuse, " (default 1: every pass); a skipped pass extrapolates the video and audio velocities of the "
            "two latest evaluations. At 20 passes: 20, 11 or 8 evaluations"),
        Section::Speed, kReuseRange, [](CliOptions& o, int64_t v) { o.request.reuse = v; });
    integer("render-width", "W", "the width of the smaller canvas the model and the VAEs run on (see --render-height)",
            Section::Speed, kSideRange, [](CliOptions& o, int64_t v) { o.request.render_width = v; });
    integer("render-height", "H",
        cat("with --render-width: the model and the VAEs run on W x H, a canvas of the output's aspect ratio "
            "(multiples of ", kCanvasMultiple, ", at most --width x --height), and every frame is upscaled to the "
            "output canvas with libswscale's Lanczos (before previews, --frames-dir and the MP4)"),
        Section::Speed, kSideRange, [](CliOptions& o, int64_t v) { o.request.render_height = v; });
    add("use-reference-rope", 0, "",
        cat("keep the released spatial RoPE on a ", kHalvedRopeCanvas, "x", kHalvedRopeCanvas,
            " canvas (there it is halved by default, as h3.c does)"),
        Section::Speed, [](CliOptions& o, const std::string&) { o.request.use_reference_rope = true; });
    integer("layers", "N",
        "run N of the transformer's blocks, from seven tenths of them (rounded up: 35 of the release's 50) to all "
        "(the default): the others, those with the smallest AdaLN gates over the request's timesteps, are skipped "
        "and not loaded; the first two and the last always run",
        Section::Speed, kLayersRange, [](CliOptions& o, int64_t v) { o.request.layers = v; });
    integer("core-reuse", "N",
        cat("run the transformer's blocks every N passes and on the last, 1..", kMaxCoreReuse,
            " (default 1: every pass); the passes between reuse their residual with fresh patch projections and "
            "heads. Not with --reuse"),
        Section::Speed, kCoreReuseRange, [](CliOptions& o, int64_t v) { o.request.core_reuse = v; });
    add("token-reduction", 0, "",
        "pair horizontally adjacent video tokens inside the middle transformer blocks (may change composition)",
        Section::Speed, [](CliOptions& o, const std::string&) { o.request.token_reduction = true; });
    add("ssd-streaming", 0, "",
        "stream the transformer's blocks (and, where the plan needs it, the conditioner's layers) from the checkpoint "
        "files every pass instead of holding a pinned host copy: for hosts with less memory than the model (reader "
        "threads into pinned staging buffers; see --memory-budget)",
        Section::Model, [](CliOptions& o, const std::string&) { o.ssd_streaming = true; });
    add("attention", 0, "dense|sparse",
        "the transformer's attention: sparse is FastVideo's tile-routed VSA-H3 (pure sparse on a checkpoint "
        "without to_gate_compress weights), dense the exact attention; default: the checkpoint's (VSA-H3 with "
        "gates for a FastH3 student, else dense)",
        Section::Speed, [](CliOptions& o, const std::string& v) {
          o.request.attention = parse_attention_choice("--attention", v);
        });
    number("sparsity", "X",
           "with the sparse attention: the fraction of video key tiles each video query tile skips, in [0, 1) "
           "(default 0: every tile, the routing exactly dense)",
           Section::Speed, kSparsityRange, [](CliOptions& o, double v) { o.request.sparsity = v; });
    // ---- previews and diagnostics
    add("show", 0, "",
        "show the middle frame of the current clean estimate inline after every pass, then a contact sheet of "
        "the final frames (kitty, Ghostty: kitty graphics; iTerm2, WezTerm, Konsole: iTerm2 inline images; "
        "H3_TERMINAL_IMAGES=kitty|iterm2|none overrides the detection)",
        Section::Diagnostics, [](CliOptions& o, const std::string&) { o.show = true; });
    add("zoom", 0, "N", cat("display the previews N times larger, ", kMinZoom, "..", kMaxZoom,
                            " (default 1; the video is unchanged)"),
        Section::Diagnostics, [](CliOptions& o, const std::string& v) { o.zoom = parse_zoom("--zoom", v); });
    add("profile", 0, "",
        "per-phase wall and CPU time, and peak device memory where the backend reports it",
        Section::Diagnostics, [](CliOptions& o, const std::string&) { o.profile = true; });
    add("json", 0, "",
        "for scripts: one JSON line on stdout when the video is done (path, seed, canvas, frames, passes, timings; "
        "the 'wrote' lines go to stderr), or --info's report as JSON",
        Section::Diagnostics, [](CliOptions& o, const std::string&) { o.json = true; });
    add("quiet", 0, "", "errors only: no progress, no summary, no 'wrote' lines (--json and --profile still print)",
        Section::Diagnostics, [](CliOptions& o, const std::string&) { o.quiet = true; });
    add("help", 'h', "", "this help", Section::Diagnostics, [](CliOptions& o, const std::string&) { o.help = true; });
    return t;
  }();
  return table;
}

const OptionSpec* find_long(const std::string& name) {
  for (const OptionSpec& o : option_table())
    if (o.name == name) return &o;
  return nullptr;
}

const OptionSpec* find_short(char c) {
  for (const OptionSpec& o : option_table())
    if (o.short_name == c) return &o;
  return nullptr;
}

std::string flag_name(const OptionSpec& o) { return "--" + o.name; }

// The edit distance between a and b counting a swap of two neighbours as one edit (optimal string alignment):
// "wdith" is one edit from "width".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The option nearest to an unknown long name, when it is near enough to be a slip: at most one edit in three
// characters (the first in the table of those equally near).
std::optional<std::string> nearest_option(const std::string& name) {
  constexpr size_t kMaxNameChars = 64;  // a longer word is no slip of an option name (and the table is quadratic)
  if (name.size() > kMaxNameChars) return std::nullopt;
  const size_t allowed = (name.size() + 2) / 3;
  std::optional<std::string> best;
  size_t best_distance = allowed + 1;
  for (const OptionSpec& o : option_table()) {
    const size_t d = edit_distance(name, o.name);
    if (d < best_distance) {
      best = o.name;
      best_distance = d;
    }
  }
  return best;
}

std::string unknown_option(const std::string& given, const std::optional<std::string>& suggestion) {
  return cat("unknown option ", quoted_input(given), suggestion ? cat("; did you mean --", *suggestion, "?") : "",
             suggestion ? " (h3 --help lists the options)." : "; h3 --help lists the options.");
}

}  // namespace

std::string ReferenceOption::value() const {
  return soundtrack == ReferenceInput::Soundtrack::Replaced ? "VIDEO AUDIO" : "PATH";
}

const std::vector<ReferenceOption>& reference_options() {
  using Kind = ReferenceInput::Kind;
  using Sound = ReferenceInput::Soundtrack;
  static const std::vector<ReferenceOption> options = {
      {"ref-image", Kind::Image, Sound::Own,
       cat("an ordered reference picture, <Picture N> in the prompt (at most ", kMaxImageReferences, ")")},
      {"ref-video", Kind::Video, Sound::Own,
       cat("an ordered reference clip with its soundtrack, <Video N> (and <Audio N>) in the prompt (at most ",
           kMaxVideoReferences, " videos)")},
      {"ref-silent-video", Kind::Video, Sound::None, "an ordered reference clip without its soundtrack"},
      {"ref-audio", Kind::Audio, Sound::Own,
       cat("an ordered reference sound, <Audio N> in the prompt (at most ", kMaxAudioReferences,
           "; 2 to 15 s each, 15 s in all; only beside a picture or a clip)")},
      {"ref-video-audio", Kind::Video, Sound::Replaced,
       "an ordered reference clip whose soundtrack is replaced by the AUDIO file"},
  };
  return options;
}

ReferenceInput make_reference(const ReferenceOption& option, const std::string& what, const std::string& path,
                              const std::string& soundtrack_path) {
  const bool replaced = option.soundtrack == ReferenceInput::Soundtrack::Replaced;
  if (path.empty() || (replaced && soundtrack_path.empty()))
    throw UsageError(replaced ? cat(what, " needs two files: VIDEO AUDIO.") : cat(what, " needs a file."));
  ReferenceInput r;
  r.kind = option.kind;
  r.path = path;
  r.soundtrack = option.soundtrack;
  if (replaced) r.soundtrack_path = soundtrack_path;
  return r;
}

ReferenceImageSize parse_reference_image_size(const std::string& what, const std::string& text) {
  if (text == "max") return ReferenceImageSize::Max;
  if (text == "match") return ReferenceImageSize::Match;
  throw UsageError(cat(what, " must be max or match, got ", quoted_input(text), "."));
}

std::string describe_reference(const ReferenceInput& r) {
  switch (r.kind) {
    case ReferenceInput::Kind::Image: return cat("image ", r.path);
    case ReferenceInput::Kind::Audio: return cat("audio ", r.path);
    case ReferenceInput::Kind::Video: break;
  }
  switch (r.soundtrack) {
    case ReferenceInput::Soundtrack::Own: return cat("video ", r.path, " with its soundtrack");
    case ReferenceInput::Soundtrack::None: return cat("video ", r.path, " without its soundtrack");
    case ReferenceInput::Soundtrack::Replaced: break;
  }
  return cat("video ", r.path, " with the soundtrack of ", r.soundtrack_path);
}

std::string seconds_text(int64_t frames) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(frames) / static_cast<double>(kFps));
  return buf;
}

bool CliOptions::was_given(const std::string& long_name) const {
  for (const std::string& g : given)
    if (g == long_name) return true;
  return false;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Whether the whole text is a decimal number: -?digits[.digits][(e|E)[+-]digits], at least one digit before the
// exponent; with `fraction` false digits alone (-?digits).
bool is_decimal(std::string_view t, bool fraction) {
  size_t i = t.starts_with('-') ? 1 : 0, digits = 0;
  for (; i < t.size() && is_digit(t[i]); ++i) ++digits;
  if (fraction && i < t.size() && t[i] == '.')
    for (++i; i < t.size() && is_digit(t[i]); ++i) ++digits;
  if (digits == 0) return false;
  if (fraction && i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    const size_t exponent = i;
    while (i < t.size() && is_digit(t[i])) ++i;
    if (i == exponent) return false;
  }
  return i == t.size();
}

std::string range_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

[[noreturn]] void range_error(const std::string& what, const std::string& text, IntegerRange r) {
  throw UsageError(cat(what, " must be between ", r.min, " and ", r.max, ", got ", quoted_input(text), "."));
}

}  // namespace

int64_t parse_integer(const std::string& what, const std::string& text, IntegerRange range) {
  if (!is_decimal(text, false)) throw UsageError(cat(what, " takes a whole number, got ", quoted_input(text), "."));
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) range_error(what, text, range);
  H3_CHECK(ec == std::errc() && p == text.data() + text.size(), "parse_integer: from_chars refused ", quoted_input(text));
  return v;
}

int64_t parse_integer_in(const std::string& what, const std::string& text, IntegerRange range) {
  const int64_t v = parse_integer(what, text, range);
  if (v < range.min || v > range.max) range_error(what, text, range);
  return v;
}

std::vector<int> parse_device_list(const std::string& what, const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty())
      throw UsageError(cat(what, " takes device ordinals separated by commas (e.g. 0,1), got ", quoted_input(text),
                           "."));
    const int d = static_cast<int>(parse_integer_in(what, item, kDeviceRange));
    if (std::find(out.begin(), out.end(), d) != out.end())
      throw UsageError(cat(what, " lists GPU ", d, " twice: each rank needs a GPU of its own."));
    out.push_back(d);
    if (out.size() > static_cast<size_t>(kGpusRange.max))
      throw UsageError(cat(what, " lists more than ", kGpusRange.max, " GPUs."));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

AttentionChoice parse_attention_choice(const std::string& what, const std::string& text) {
  if (text == "dense") return AttentionChoice::Dense;
  if (text == "sparse") return AttentionChoice::Sparse;
  throw UsageError(cat(what, " takes dense or sparse, got ", quoted_input(text), "."));
}

double parse_number(const std::string& what, const std::string& text, NumberRange range) {
  if (!is_decimal(text, true)) throw UsageError(cat(what, " takes a number, got ", quoted_input(text), "."));
  double v = 0;
  // from_chars, unlike strtod, reads a subnormal (5e-324) as the number it is; only a value beyond a double's range
  // (1e400, or 1e-400, which would round to zero) is out of range.
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range)
    throw UsageError(cat(what, " must be between ", range_text(range.min), " and ", range_text(range.max), ", got ",
                         quoted_input(text), "."));
  H3_CHECK(ec == std::errc() && p == text.data() + text.size(), "parse_number: from_chars refused ", quoted_input(text));
  return v;
}

std::optional<uint64_t> parse_seed(const std::string& what, const std::string& text) {
  if (text == "random") return std::nullopt;
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (!is_decimal(text, false) || ec != std::errc() || p != end)
    throw UsageError(cat(what, " takes a whole number from 0 to 18446744073709551615 or 'random', got ", quoted_input(text),
                         "."));
  return v;
}

uint64_t draw_random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

int parse_zoom(const std::string& what, const std::string& text) {
  return static_cast<int>(parse_integer_in(what, text, kZoomRange));
}

CliOptions parse_command_line(int argc, char** argv) {
  CliOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const OptionSpec* spec = nullptr;
    std::optional<std::string> inline_value;  // --name=value, -dVALUE
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      const size_t eq = arg.find('=');
      const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      spec = find_long(name);
      if (eq != std::string::npos) inline_value = arg.substr(eq + 1);
      if (!spec) throw UsageError(unknown_option(arg.substr(0, eq), nearest_option(name)));
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      // A long name after one dash (-width) is a slip for --width, even where its first letter is a short option
      // (-prompt is not -p rompt).
      const std::string word = arg.substr(0, arg.find('=')), name = word.substr(1);
      if (name.size() > 1 && find_long(name)) throw UsageError(unknown_option(word, name));
      spec = find_short(arg[1]);
      if (!spec)
        throw UsageError(name.size() > 1 ? unknown_option(word, nearest_option(name))
                                         : unknown_option(word, std::nullopt));
      if (arg.size() > 2) inline_value = arg.substr(2);
    } else {
      throw UsageError(cat("unexpected argument ", quoted_input(arg), "; give the prompt with -p \"...\" (quoted)."));
    }
    if (spec->apply_pair) {
      if (inline_value || i + 2 >= argc)
        throw UsageError(cat(flag_name(*spec), " needs two values (", flag_name(*spec), " ", spec->value, ")."));
      spec->apply_pair(o, argv[i + 1], argv[i + 2]);
      i += 2;
      o.given.push_back(spec->name);
      continue;
    }
    std::string value;
    if (spec->value.empty()) {
      if (inline_value) throw UsageError(cat(flag_name(*spec), " takes no value, got ", quoted_input(*inline_value), "."));
    } else if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      throw UsageError(cat(flag_name(*spec), " needs a value (", flag_name(*spec), " ", spec->value, ")."));
    }
    spec->apply(o, value);
    o.given.push_back(spec->name);
  }
  if (o.prompt) o.request.prompt = *o.prompt;
  return o;
}

const std::vector<std::string>& one_shot_only_options() {
  static const std::vector<std::string> names = {"output", "frames-dir", "wav"};
  return names;
}

std::string help_text() {
  std::string out = cat(
      "h3: MiniMax-H3 turns a prompt into a video with its soundtrack (MP4, ", kFps, " fps, 32 kHz stereo).\n"
      "\n"
      "Usage:\n"
      "  h3 -d DIR -p PROMPT [options]   generate one video\n"
      "  h3 -d DIR [options]             interactive session: type prompts, !help lists the commands;\n"
      "                                  the model stays loaded and prompts stay encoded between videos\n"
      "  h3 -d DIR --info                what the snapshot holds and the device, without loading weights\n"
      "  h3 tool NAME ...                developer tools (h3 tool --help)\n");
  const std::pair<Section, const char*> sections[] = {
      {Section::Model, "Model and device"},
      {Section::Prompt, "Prompt and output"},
      {Section::Keyframes, "Keyframes (the fl2va workflow)"},
      {Section::References, "References (the ref2va workflow: ordered pictures, clips and sounds, kept in command-line order)"},
      {Section::Canvas, "Canvas and duration"},
      {Section::Sampling, "Sampling"},
      {Section::Speed, "Speed controls (faster, less faithful; the defaults are the exact path)"},
      {Section::Diagnostics, "Previews and diagnostics"}};
  constexpr size_t kHelpColumn = 30, kHelpWidth = 100;
  for (const auto& [section, title] : sections) {
    out += cat("\n", title, ":\n");
    for (const OptionSpec& o : option_table()) {
      if (o.section != section) continue;
      std::string line = o.short_name ? cat("  -", o.short_name, ", --", o.name) : cat("      --", o.name);
      if (!o.value.empty()) line += " " + o.value;
      if (line.size() + 2 > kHelpColumn) {
        out += line + "\n";
        line.clear();
      }
      line.resize(kHelpColumn, ' ');
      // Word-wrap the description into the column.
      size_t at = 0;
      bool empty = true;
      while (at < o.help.size()) {
        const size_t end = std::min(o.help.find(' ', at), o.help.size());
        const std::string word = o.help.substr(at, end - at);
        if (!empty && line.size() + 1 + word.size() > kHelpWidth) {
          out += line + "\n";
          line.assign(kHelpColumn, ' ');
          empty = true;
        }
        line += (empty ? "" : " ") + word;
        empty = false;
        at = end + 1;
      }
      out += line + "\n";
    }
  }
  out += cat(
      "\nOptions take their value as the next argument or after '=' (--width=512); -o '' is an empty value.\n"
      "Ranges are checked against the model before anything loads: a bad value gets one sentence naming\n"
      "the rule and exit status 2. Other failures exit 1. Ctrl-C cancels within about a second and exits 130,\n"
      "leaving nothing new on disk; a second Ctrl-C quits at once, removing the partial files.\n"
      "\nEnvironment: H3_TERMINAL_IMAGES=kitty|iterm2|none (--show), H3_LOG_LEVEL=debug|info|warn|error.\n"
      "\nExample (a tiny random-weight model, seconds on a CPU):\n"
      "  h3 tool make-tiny-model tiny-model\n"
      "  h3 -d tiny-model -p \"A red fox walks through fresh snow.\" --width 128 --height 128 --steps 4\n");
  return out;
}

}  // namespace h3::app

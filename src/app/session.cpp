#include "app/session.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>
#include <tuple>

#include "app/generation.h"
#include "app/interrupt.h"
#include "app/outputs.h"
#include "pipeline/geometry.h"
#include "pipeline/precision.h"
#include "pipeline/request.h"
#include "text/quote.h"

namespace h3::app {

namespace {

constexpr const char* kPrompt = "h3> ";
constexpr size_t kCacheListChars = 72;  // !cache shows this much of each prompt
constexpr size_t kHelpColumn = 23;      // where !help's descriptions start

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return {};
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

// The engine's sentences name the command-line flags; in the session the same rules are set with !commands.
std::string in_session_words(std::string text) {
  const std::pair<std::string, std::string> names[] = {{"--frames", "!frames"},     {"--seconds", "!seconds"},
                                                       {"--steps", "!steps"},       {"--first-frame", "!first"},
                                                       {"--last-frame", "!last"},   {"--ref-", "!ref-"},
                                                       {"--layers", "!layers"}, {"--precision", "!precision"},     {"--core-reuse", "!core-reuse"},
                                                       {"--render-width × --render-height", "!render-size"},
                                                       {"--reuse", "!reuse"}};
  for (const auto& [flag, command] : names)
    for (size_t at = text.find(flag); at != std::string::npos; at = text.find(flag, at + command.size()))
      text.replace(at, flag.size(), command);
  return text;
}

// The words of a command's argument, split at white space.
std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

void say(const std::string& text) {
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

class Session {
 public:
  Session(Engine& engine, const CliOptions& o)
      : engine_(engine), model_dir_(o.model_dir), settings_(o.request), random_seed_(o.random_seed), show_(o.show),
        zoom_(o.zoom), profile_(o.profile), terminal_(detect_terminal()) {
    settings_.prompt.clear();
  }

  int run(LineReader& reader, bool interactive) {
    output_dir_ = create_session_folder(kDefaultOutputDir);
    say(cat("h3 interactive session: model ", model_dir_, ", ", engine_.backend_name(), " backend (",
            engine_.device_description(), ")"));
    say(cat("videos go to ", output_dir_, "/"));
    say("type a prompt to make a video; !help lists the commands; !quit or Ctrl-D leaves");
    if (show_ && terminal_.protocol == TerminalProtocol::None) {
      print_error_lines(cat("--show: no inline previews here: ", terminal_.description, "."));
      show_ = false;
    }
    say(settings_line());
    for (;;) {
      const ReadResult r = reader.read(interactive ? kPrompt : "");
      if (r.status == ReadStatus::EndOfInput) break;
      if (r.status == ReadStatus::Interrupted) continue;
      const std::string line = trim(r.line);
      if (line.empty()) continue;
      reader.remember(line);
      if (line[0] == '!') {
        if (!command(line.substr(1))) break;
      } else {
        generate(line, next_seed());
      }
    }
    say("bye");
    return 0;
  }

 private:
  struct Command {
    std::string name;
    std::string args;
    std::string help;
    std::function<void(Session&, const std::string&)> run;
  };

  static const std::vector<Command>& commands() {
    static const std::vector<Command> table = [] {
      std::vector<Command> t = {
          {"help", "", "this list", [](Session& s, const std::string&) { s.help(); }},
          {"status", "", "settings, device, loaded components, prompt cache",
           [](Session& s, const std::string&) { s.status(); }},
          {"seed", "[N|random]", "the seed of the next video (N: 0..2^64-1; random: a new one each time)",
           [](Session& s, const std::string& a) { s.set_seed(a); }},
          {"size", "[WxH]", "the canvas (multiples of the model's canvas multiple, at most 768x1344 pixels)",
           [](Session& s, const std::string& a) { s.set_size(a); }},
          {"first", "[PATH|clear]", "the keyframe the video starts from (fl2va; the canvas follows it without !size)",
           [](Session& s, const std::string& a) { s.set_keyframe(a, &GenerationRequest::first_frame, "first"); }},
          {"last", "[PATH|clear]", "the keyframe the video ends on (fl2va)",
           [](Session& s, const std::string& a) { s.set_keyframe(a, &GenerationRequest::last_frame, "last"); }},
      };
      // ref2va's references, appended in order as the command line's --ref-* flags append them.
      for (const ReferenceOption& r : reference_options())
        t.push_back({r.name, r.value(), r.help, [&r](Session& s, const std::string& a) { s.add_reference(r, a); }});
      t.insert(t.end(), {
          {"refs", "[clear]", "list the references (numbered), or remove them all",
           [](Session& s, const std::string& a) { s.references(a); }},
          {"ref-remove", "N", "remove reference N (1..the number of references; the later ones move up)",
           [](Session& s, const std::string& a) { s.remove_reference(a); }},
          {"ref-image-size", "[max|match]",
           "how reference pictures are sized: max (short edge at the snapshot's reference_image_short_edge) or match "
           "(down only, area-capped)",
           [](Session& s, const std::string& a) { s.set_reference_image_size(a); }},
          {"frames", "[N]", cat("frames at ", kFps, " fps, 1..", kMaxFrames, ", rounded up to 17n+5"),
           [](Session& s, const std::string& a) { s.set_frames(a); }},
          {"seconds", "[S]", cat("duration instead of frames, up to ", seconds_text(kMaxFrames), " s"),
           [](Session& s, const std::string& a) { s.set_seconds(a); }},
          {"steps", "[N|default]",
           cat("denoising passes, ", kMinSteps, "..", kMaxSteps, " (default: the checkpoint's)"),
           [](Session& s, const std::string& a) { s.set_steps(a); }},
          {"reuse", "[N]", cat("evaluate the model at the first, the last and every N-th pass, ", kMinReuse, "..",
                               kMaxReuse, " (1: every pass)"),
           [](Session& s, const std::string& a) { s.set_reuse(a); }},
          {"render-size", "[WxH|native]",
           "run the model and the VAEs on a smaller canvas of the output's aspect ratio, then upscale (native: the "
           "output canvas)",
           [](Session& s, const std::string& a) { s.set_render_size(a); }},
          {"reference-rope", "[on|off]",
           cat("the released spatial RoPE at ", kHalvedRopeCanvas, "x", kHalvedRopeCanvas, " too (off: halved there)"),
           [](Session& s, const std::string& a) { s.set_reference_rope(a); }},
          {"layers", "[N|all]", "transformer blocks to run, seven tenths of them (rounded up) to all",
           [](Session& s, const std::string& a) { s.set_layers(a); }},
          {"core-reuse", "[N]", cat("run the transformer's blocks every N passes, 1..", kMaxCoreReuse),
           [](Session& s, const std::string& a) { s.set_core_reuse(a); }},
          {"token-reduction", "[on|off]", "pair video tokens inside the middle transformer blocks",
           [](Session& s, const std::string& a) { s.set_token_reduction(a); }},
          {"attention", "[dense|sparse|default]", "the transformer's attention (default: the checkpoint's)",
           [](Session& s, const std::string& a) { s.set_attention(a); }},
          {"sparsity", "[X|default]", "with the sparse attention: the fraction of video key tiles skipped, [0, 1)",
           [](Session& s, const std::string& a) { s.set_sparsity(a); }},
          {"show", "[on|off]", "previews after every pass and the final frames (graphical terminals)",
           [](Session& s, const std::string& a) { s.set_show(a); }},
          {"zoom", "[N]", cat("preview display size, ", kMinZoom, "..", kMaxZoom, " times"),
           [](Session& s, const std::string& a) { s.set_zoom(a); }},
          {"profile", "[on|off]", "per-phase wall/CPU time and peak device memory after each video",
           [](Session& s, const std::string& a) { s.set_profile(a); }},
          {"precision", "[bf16|fp8]",
           "the transformer blocks' products: bf16 (exact) or fp8 (CUDA, compute capability 8.9+; on Hopper their "
           "attention too); a change loads the transformer again",
           [](Session& s, const std::string& a) { s.set_precision(a); }},
          {"output", "[DIR]", "the folder numbered videos go to (created when missing)",
           [](Session& s, const std::string& a) { s.set_output(a); }},
          {"save", "PATH", "copy the last video to PATH", [](Session& s, const std::string& a) { s.save(a); }},
          {"again", "", "the last prompt again with the next seed (seed + 1, or a new random one)",
           [](Session& s, const std::string& a) { s.again(a); }},
          {"plan", "", "the residency plan the next video runs under (from --memory-budget or the free device memory)",
           [](Session& s, const std::string&) { s.plan(); }},
          {"cache", "[clear]", "list the cached prompt encodings, or clear them",
           [](Session& s, const std::string& a) { s.cache(a); }},
          {"quit", "", "leave (also !exit, Ctrl-D)", nullptr},
      });
      return t;
    }();
    return table;
  }

  // Returns false to leave the session.
  bool command(const std::string& text) {
    const std::string t = trim(text);
    const size_t sp = t.find_first_of(" \t");
    const std::string name = t.substr(0, sp);
    const std::string arg = sp == std::string::npos ? std::string() : trim(t.substr(sp));
    if (name == "quit" || name == "exit" || name == "q") return false;
    for (const Command& c : commands()) {
      if (name != c.name) continue;
      try {
        c.run(*this, arg);
      } catch (const Cancelled&) {
        print_error_lines("cancelled; nothing was written.");
      } catch (const Error& e) {
        print_error_lines(e.what());
      }
      return true;
    }
    print_error_lines(cat("unknown command ", quoted_input("!" + name), "; !help lists the commands."));
    return true;
  }

  void help() {
    say("commands (any other line is a prompt):");
    // A command too wide for the column has its description on the next line, as --help does.
    for (const Command& c : commands()) {
      std::string line = cat("  !", c.name, c.args.empty() ? "" : " ", c.args);
      if (line.size() >= kHelpColumn) {
        say(line);
        line.clear();
      }
      line.resize(kHelpColumn, ' ');
      say(line + c.help);
    }
    say("Ctrl-C cancels a running video (or clears the line you are typing).");
  }

  std::string settings_line() {
    const ResolvedRequest r = engine_.validate(settings_, RequestCheck::SettingsOnly);
    // With random seeds, the one the last video was made with (to make it again: !seed N).
    const std::string seed = !random_seed_        ? cat(settings_.seed)
                             : last_video_.empty() ? std::string("random")
                                                   : cat("random (the last video's: ", last_video_seed_, ")");
    const std::string controls = describe_speed_controls(r);
    return cat("settings: ", r.width, "x", r.height, ", ", r.frames, " frames (", seconds_text(r.frames), " s), ",
               r.steps, " passes, seed ", seed, ", show ", show_ ? "on" : "off", ", zoom ", zoom_,
               ", profile ", profile_ ? "on" : "off", controls.empty() ? "" : "; " + controls);
  }

  // The plan the current settings would run under now (what is resident counts as available).
  void plan() {
    GenerationRequest r = settings_;
    if (r.prompt.empty()) r.prompt = "a";  // the plan does not depend on the words
    say(cat("residency plan: ", engine_.residency_plan(r)));
  }

  void status() {
    say(settings_line());
    say(cat("keyframes: ", keyframes_text()));
    say_references();
    say(cat("model: ", model_dir_));
    say(cat("device: ", engine_.backend_name(), " backend, ", engine_.device_description()));
    say(cat("previews: ", terminal_.protocol == TerminalProtocol::None ? "unavailable" : "available", " (",
            terminal_protocol_name(terminal_.protocol), "; ", terminal_.description, ")"));
    say(cat("outputs: ", output_dir_, "/", last_video_.empty() ? "" : cat(" (last: ", last_video_, ")")));
    const EngineStats st = engine_.stats();
    say(cat("engine: components loaded ", st.component_loads, " | prompt encodes ", st.prompt_encodes,
            " | prompt cache hits ", st.prompt_cache_hits, " | cached prompts ", engine_.prompt_cache_size(),
            " | videos ", st.generations));
  }

  // When the command has an argument: the settings as `change` edits them, applied when the engine accepts them
  // (otherwise the rule is printed and the settings stay).
  template <typename Change>
  void change_settings(const std::string& a, Change&& change) {
    if (a.empty()) return;
    GenerationRequest candidate = settings_;
    change(candidate);
    // The one rule an edit of either side breaks by itself: said alone, not among the other side's rules.
    if (candidate.has_keyframes() && !candidate.references.empty())
      throw UsageError(in_session_words(kKeyframesWithReferencesRule));
    try {
      engine_.validate(candidate, RequestCheck::SettingsOnly);
    } catch (const Error& e) {
      throw UsageError(in_session_words(e.what()));
    }
    settings_ = candidate;
  }

  void set_seed(const std::string& a) {
    if (!a.empty()) {
      const std::optional<uint64_t> s = parse_seed("!seed", a);
      random_seed_ = !s;
      if (s) settings_.seed = *s;
    }
    say(random_seed_ ? std::string("seed: random") : cat("seed: ", settings_.seed));
  }

  // "WxH" as two integers; `what` names the command in the messages.
  static std::pair<int64_t, int64_t> parse_size(const std::string& what, const std::string& a) {
    const size_t x = a.find_first_of("xX");
    if (x == std::string::npos)
      throw UsageError(cat(what, " takes WxH, e.g. ", what, " 512x512, got ", quoted_input(a), "."));
    return {parse_integer(what + "'s width", a.substr(0, x), kSideRange),
            parse_integer(what + "'s height", a.substr(x + 1), kSideRange)};
  }

  void set_size(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) { std::tie(c.width, c.height) = parse_size("!size", a); });
    const ResolvedRequest r = engine_.validate(settings_, RequestCheck::SettingsOnly);
    say(cat("size: ", r.width, "x", r.height));
  }

  // The keyframes of the next videos, "none" when there are none.
  std::string keyframes_text() const {
    std::string out;
    for (const auto& [name, k] : {std::pair{"first", &settings_.first_frame}, std::pair{"last", &settings_.last_frame}})
      if (*k) out += cat(out.empty() ? "" : ", ", name, " ", (*k)->describe());
    return out.empty() ? "none" : out;
  }

  void set_keyframe(const std::string& a, std::optional<ImageInput> GenerationRequest::*slot, const char* name) {
    if (a == "clear") {
      (settings_.*slot).reset();
    } else {
      change_settings(a, [&](GenerationRequest& c) { c.*slot = ImageInput::file(a); });
    }
    say(cat("keyframes: ", keyframes_text()));
  }

  // The references of the next videos, numbered from 1 as !ref-remove takes them.
  void say_references() {
    const std::vector<ReferenceInput>& refs = settings_.references;
    if (refs.empty()) {
      say("references: none");
      return;
    }
    say(cat("references: ", refs.size(), " (pictures sized ",
            reference_image_size_name(settings_.reference_image_size), ")"));
    for (size_t i = 0; i < refs.size(); ++i) say(cat("  ", i + 1, ". ", describe_reference(refs[i])));
  }

  // !ref-image PATH, !ref-video PATH, ..., !ref-video-audio VIDEO AUDIO: appended after the references there are.
  void add_reference(const ReferenceOption& option, const std::string& a) {
    const std::string what = "!" + option.name;
    ReferenceInput reference;
    if (option.soundtrack == ReferenceInput::Soundtrack::Replaced) {
      const std::vector<std::string> files = words_of(a);
      if (files.size() != 2)
        throw UsageError(cat(what, " needs two files, VIDEO AUDIO (paths without spaces), got ", quoted_input(a), "."));
      reference = make_reference(option, what, files[0], files[1]);
    } else {
      reference = make_reference(option, what, a);
    }
    change_settings(a, [&](GenerationRequest& c) { c.references.push_back(reference); });
    say_references();
  }

  void references(const std::string& a) {
    if (a == "clear") {
      settings_.references.clear();
    } else if (!a.empty()) {
      throw UsageError(cat("!refs takes nothing or 'clear', got ", quoted_input(a), "."));
    }
    say_references();
  }

  void remove_reference(const std::string& a) {
    const size_t count = settings_.references.size();
    if (count == 0) throw UsageError("there are no references to remove; !ref-image, !ref-video, ... add them.");
    const int64_t n = parse_integer_in("!ref-remove", a, {1, static_cast<int64_t>(count)});
    change_settings(a, [&](GenerationRequest& c) { c.references.erase(c.references.begin() + (n - 1)); });
    say_references();
  }

  void set_reference_image_size(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) {
      c.reference_image_size = parse_reference_image_size("!ref-image-size", a);
    });
    say(cat("ref-image-size: ", reference_image_size_name(settings_.reference_image_size)));
  }

  void say_duration() {
    const ResolvedRequest r = engine_.validate(settings_, RequestCheck::SettingsOnly);
    say(cat("frames: ", r.frames, " (", seconds_text(r.frames), " s at ", kFps, " fps)",
            r.frames_note.empty() ? "" : cat("; ", in_session_words(r.frames_note))));
  }

  void set_frames(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) {
      c.frames = parse_integer("!frames", a, kFramesRange);
      c.seconds.reset();
    });
    say_duration();
  }

  void set_seconds(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) {
      c.seconds = parse_number("!seconds", a, kSecondsRange);
      c.frames.reset();
    });
    say_duration();
  }

  void set_steps(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) {
      if (a == "default") {
        c.steps.reset();
      } else {
        c.steps = parse_integer("!steps", a, kStepsRange);
      }
    });
    const ResolvedRequest r = engine_.validate(settings_, RequestCheck::SettingsOnly);
    say(cat("steps: ", r.steps, " passes", settings_.steps ? "" : " (the checkpoint's)"));
  }

  // The next request's blocks change when it runs: the blocks it drops are freed, those it needs again are loaded.
  void set_layers(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) {
      if (a == "all") {
        c.layers.reset();
      } else {
        c.layers = parse_integer("!layers", a, kLayersRange);
      }
    });
    say(cat("layers: ", settings_.layers ? cat(*settings_.layers) : std::string("all")));
  }

  void set_core_reuse(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) { c.core_reuse = parse_integer("!core-reuse", a, kCoreReuseRange); });
    say(cat("core-reuse: ", settings_.core_reuse));
  }

  void set_attention(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) {
      if (a == "default") {
        c.attention.reset();
      } else {
        c.attention = parse_attention_choice("!attention", a);
      }
    });
    say(cat("attention: ", settings_.attention ? attention_choice_name(*settings_.attention) : "the checkpoint's"));
  }

  void set_sparsity(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) {
      if (a == "default") {
        c.sparsity.reset();
      } else {
        c.sparsity = parse_number("!sparsity", a, kSparsityRange);
      }
    });
    say(cat("sparsity: ", settings_.sparsity ? cat(*settings_.sparsity) : std::string("default")));
  }

  void set_token_reduction(const std::string& a) {
    const bool on = parse_toggle("!token-reduction", a, settings_.token_reduction);
    change_settings(a, [&](GenerationRequest& c) { c.token_reduction = on; });
    say(cat("token reduction: ", settings_.token_reduction ? "on" : "off"));
  }

  void set_reuse(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) { c.reuse = parse_integer("!reuse", a, kReuseRange); });
    const ResolvedRequest r = engine_.validate(settings_, RequestCheck::SettingsOnly);
    say(cat("reuse: ", settings_.reuse, " (", r.evaluated_passes, " of ", r.steps, " passes evaluate the model)"));
    if (const std::string w = few_passes_reuse_warning(r); !w.empty())
      print_error_lines(cat("warning: ", in_session_words(w)));
  }

  void set_render_size(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) {
      if (a == "native") {
        c.render_width.reset();
        c.render_height.reset();
      } else {
        std::tie(c.render_width, c.render_height) = parse_size("!render-size", a);
      }
    });
    const ResolvedRequest r = engine_.validate(settings_, RequestCheck::SettingsOnly);
    if (!settings_.render_width) say(cat("render size: native (the output canvas)"));
    else say(cat("render size: ", r.render_width, "x", r.render_height, ", upscaled to ", r.width, "x", r.height));
  }

  void set_reference_rope(const std::string& a) {
    change_settings(a, [&](GenerationRequest& c) {
      c.use_reference_rope = parse_toggle("!reference-rope", a, c.use_reference_rope);
    });
    say(cat("reference-rope: ", settings_.use_reference_rope ? "on (the released spatial RoPE)"
                                                             : cat("off (halved at ", kHalvedRopeCanvas, "x",
                                                                   kHalvedRopeCanvas, ")")));
  }

  static bool parse_toggle(const std::string& what, const std::string& a, bool current) {
    if (a.empty()) return current;
    if (a == "on") return true;
    if (a == "off") return false;
    throw UsageError(cat(what, " takes on or off, got ", quoted_input(a), "."));
  }

  void set_show(const std::string& a) {
    const bool on = parse_toggle("!show", a, show_);
    if (on && terminal_.protocol == TerminalProtocol::None)
      throw UsageError(cat("no inline previews here: ", terminal_.description, "; previews stay off."));
    show_ = on;
    say(cat("show: ", show_ ? "on" : "off", show_ ? cat(" (", terminal_protocol_name(terminal_.protocol), ")") : ""));
  }

  void set_zoom(const std::string& a) {
    if (!a.empty()) zoom_ = parse_zoom("!zoom", a);
    say(cat("zoom: ", zoom_));
  }

  void set_precision(const std::string& a) {
    if (!a.empty()) {
      if (const auto problem = check_precision_word("!precision", a)) throw UsageError(*problem + ".");
      engine_.set_precision(a);
    }
    say(cat("precision: ", engine_.precision()));
  }

  void set_profile(const std::string& a) {
    profile_ = parse_toggle("!profile", a, profile_);
    say(cat("profile: ", profile_ ? "on" : "off"));
  }

  void set_output(const std::string& a) {
    if (!a.empty()) {
      check_folder_destination("!output", a);
      std::error_code ec;
      std::filesystem::create_directories(a, ec);
      H3_CHECK(!ec, "cannot create ", a, ": ", ec.message());
      output_dir_ = a;
    }
    say(cat("videos go to ", output_dir_, "/"));
  }

  void save(const std::string& a) {
    if (a.empty()) throw UsageError("!save needs a file name: !save PATH.");
    if (last_video_.empty()) throw UsageError("there is no video to save yet; type a prompt first.");
    check_file_destination("!save", a);
    std::vector<NamedPath> inputs = request_input_files(settings_);
    inputs.push_back({"the last video", last_video_});
    try {
      check_outputs_apart(model_dir_, inputs, {{"!save", a}});
    } catch (const UsageError& e) {
      throw UsageError(in_session_words(e.what()));
    }
    copy_file_to(last_video_, a);
    say(cat("saved ", last_video_, " as ", a));
  }

  void again(const std::string& a) {
    if (!a.empty()) throw UsageError("!again takes no value; it repeats the last prompt with the next seed.");
    if (last_prompt_.empty()) throw UsageError("there is no prompt to repeat yet; type one first.");
    if (!random_seed_) settings_.seed = last_seed_ + 1;
    generate(last_prompt_, next_seed());
  }

  void cache(const std::string& a) {
    if (a == "clear") {
      engine_.clear_prompt_cache();
      say("prompt cache cleared");
      return;
    }
    if (!a.empty()) throw UsageError(cat("!cache takes nothing or 'clear', got ", quoted_input(a), "."));
    const std::vector<PromptCacheEntry> entries = engine_.prompt_cache_entries();
    say(cat("prompt cache: ", entries.size(), " cached prompt", entries.size() == 1 ? "" : "s",
            entries.empty() ? "" : " (most recent first)"));
    int i = 0;
    for (const PromptCacheEntry& e : entries) {
      std::string p = e.prompt;
      if (p.size() > kCacheListChars) p = p.substr(0, kCacheListChars - 3) + "...";
      say(cat("  ", ++i, ". ", e.tokens, " tokens: ", p));
    }
  }

  uint64_t next_seed() const { return random_seed_ ? draw_random_seed() : settings_.seed; }

  void generate(const std::string& prompt, uint64_t seed) {
    GenerationRequest r = settings_;
    r.prompt = prompt;
    r.seed = seed;
    OutputPlan plan;
    plan.numbered = NumberedFiles(output_dir_, "", ".mp4");
    DisplaySettings display;
    display.show = show_;
    display.zoom = zoom_;
    display.profile = profile_;
    display.terminal = terminal_;
    clear_interrupt();
    set_generation_running(true);
    last_prompt_ = prompt;  // !again repeats the last attempt, finished or not
    last_seed_ = seed;
    try {
      last_video_ = run_generation(engine_, r, plan, display, &interrupt_flag());
      last_video_seed_ = seed;
    } catch (const Cancelled&) {
      print_error_lines("cancelled; nothing was written.");
    } catch (const Error& e) {
      print_error_lines(e.what());
    }
    set_generation_running(false);
    clear_interrupt();
  }

  Engine& engine_;
  std::string model_dir_;
  GenerationRequest settings_;
  bool random_seed_;
  bool show_;
  int zoom_;
  bool profile_;
  TerminalSupport terminal_;
  std::string output_dir_;
  std::string last_prompt_, last_video_;
  uint64_t last_seed_ = 0;
  uint64_t last_video_seed_ = 0;
};

}  // namespace

int run_session(Engine& engine, const CliOptions& options, LineReader& reader, bool interactive) {
  Session s(engine, options);
  return s.run(reader, interactive);
}

}  // namespace h3::app

#include "tools/encode_text_tool.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "io/snapshot.h"
#include "models/qwen3vl/text_model.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "tools/tool_args.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace h3 {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kUsage =
    R"(usage: h3 tool encode-text --text-encoder DIR --tokenizer PATH --prompt TEXT --out OUT.safetensors
                           [--device cpu|cuda|auto]

Encodes PROMPT as MiniMax-H3's t2va conditioner does: the prompt alone, tokenized with nothing added, through
the Qwen3-VL text model to the hidden state after decoder layer 50. Writes input_ids (Nt, I64) and
prompt_embeds (1, Nt, hidden, F32) to OUT.

  --text-encoder DIR  the text_encoder/ folder of a MiniMax-H3 snapshot (or the snapshot folder holding it)
  --tokenizer PATH    a tokenizer.json, or a folder holding one (e.g. MODEL/tokenizer)
  --prompt TEXT       the prompt (UTF-8, not empty)
  --out FILE          the safetensors file to write (replaced atomically)
  --device NAME       cpu, cuda or auto (default: auto = cuda when available)
  --help              show this help
)";

struct Args {
  std::string text_encoder, tokenizer, out, device = "auto";
  std::optional<std::string> prompt;
  bool help = false;
};

// Parses the options; returns an error sentence for bad usage. --prompt may be given empty (encode_text then says
// why an empty prompt is refused), so only its presence is required here.
std::optional<std::string> parse(int argc, char** argv, Args& a) {
  ToolArgs t;
  std::optional<std::string> problem =
      parse_tool_args(argc, argv, {"--text-encoder", "--tokenizer", "--prompt", "--out", "--device"},
                      {"--text-encoder DIR", "--tokenizer PATH"}, t);
  a.help = t.help;
  if (problem || a.help) return problem;
  a.text_encoder = t.get("--text-encoder");
  a.tokenizer = t.get("--tokenizer");
  a.out = t.get("--out");
  if (t.has("--prompt")) a.prompt = t.get("--prompt");
  if (!t.get("--device").empty()) a.device = t.get("--device");
  if (!a.prompt) return std::string("--prompt TEXT is required");
  if (a.out.empty()) return std::string("--out FILE is required");
  return check_device_option(t.get("--device"));
}

// The text encoder component at `dir`: the text_encoder/ folder itself, or a snapshot folder holding one.
Component text_encoder_component(const std::string& dir) {
  H3_CHECK(dir_exists(dir), "--text-encoder: '", dir, "' is not a folder");
  std::string folder = dir;
  if (!file_exists(join_path(folder, "config.json")) && file_exists(join_path(dir, "text_encoder/config.json")))
    folder = join_path(dir, "text_encoder");
  H3_CHECK(file_exists(join_path(folder, "config.json")), "--text-encoder: '", dir,
           "' has no config.json (expected the text_encoder/ folder of a MiniMax-H3 snapshot)");
  Component c;
  c.name = "text_encoder";
  c.present = true;
  c.dir = folder;
  c.weights = folder;
  c.config_files = {join_path(folder, "config.json")};
  return c;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void encode_text(const Args& a, std::ostream& out) {
  // Cheap checks first: the folders, the config, the tokenizer and the prompt; then the expensive load.
  const Component component = text_encoder_component(a.text_encoder);
  const TextEncoderConfig config = load_text_encoder_config(component);
  const fs::path out_dir = fs::absolute(a.out).parent_path();
  H3_CHECK(fs::is_directory(out_dir), "--out: the folder '", out_dir.string(), "' does not exist");
  const Tokenizer tokenizer = Tokenizer::from_file(a.tokenizer);
  const Presentation p = present_t2va(tokenizer, *a.prompt);
  for (size_t i = 0; i < p.ids.size(); ++i)
    H3_CHECK(p.ids[i] < config.text.vocab_size, "the tokenizer gives token id ", p.ids[i], " at position ", i,
             ", outside the text encoder's vocabulary [0, ", config.text.vocab_size,
             "); --tokenizer and --text-encoder do not belong together");

  std::unique_ptr<Backend> backend = make_backend(a.device);
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<QwenTextModel> model = QwenTextModel::load(*backend, config, component.weights);
  const double load_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const Tensor hidden = model->encode(p.ids);
  const double encode_s = seconds_since(t0);

  const int64_t n = static_cast<int64_t>(p.ids.size());
  Tensor ids = Tensor::empty({n}, DType::I64);
  for (int64_t i = 0; i < n; ++i) ids.ptr<int64_t>()[i] = p.ids[i];
  write_safetensors(a.out, {{"input_ids", ids}, {"prompt_embeds", hidden.reshape({1, n, config.text.hidden_size})}});
  char line[256];
  std::snprintf(line, sizeof line, "wrote %s: %lld tokens x %lld (%s; load %.2f s, encode %.2f s)\n", a.out.c_str(),
                static_cast<long long>(n), static_cast<long long>(config.text.hidden_size), backend->name().c_str(),
                load_s, encode_s);
  out << line;
}

}  // namespace

int tool_encode_text(int argc, char** argv, std::ostream& out, std::ostream& err) {
  Args args;
  const auto usage_error = parse(argc, argv, args);
  if (const auto status = usage_exit_status("encode-text", kUsage, usage_error, args.help, out, err)) return *status;
  try {
    encode_text(args, out);
    out.flush();
    return out ? 0 : 1;
  } catch (const Error& e) {
    err << "h3 tool encode-text: error: " << e.what() << "\n";
    return 1;
  }
}

int tool_encode_text(int argc, char** argv) { return tool_encode_text(argc, argv, std::cout, std::cerr); }

}  // namespace h3

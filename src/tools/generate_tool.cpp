#include "tools/generate_tool.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "h3/h3.h"
#include "io/safetensors.h"
#include "pipeline/request_json.h"
#include "tools/tool_args.h"
#include "util/error.h"
#include "util/overwrite_check.h"

namespace h3 {

namespace {

constexpr const char* kUsage =
    "usage: h3 tool generate --model DIR --request REQUEST.json [--noise NOISE.safetensors] --out OUT.safetensors\n"
    "                        [--device cpu|cuda|auto] [--tile PX --tile-overlap PX]\n"
    "  REQUEST  {\"prompt\", \"width\"?, \"height\"?, \"frames\"?, \"seconds\"?, \"steps\"? (passes), \"seed\"?,\n"
    "           \"first_frame\"?, \"last_frame\"?, \"references\"?}, paths relative to its folder\n"
    "  NOISE    optional tensors replacing the seed's draws: latents (1, C, F, h, w), audio_latents (2, Ca, A),\n"
    "           condition_noise_<i> and encode_noise_<i> per visual condition i (packed order)\n"
    "  OUT      receives video (3, F, H, W) float32 in [0, 1] and audio (2, S) float32 (untrimmed)\n"
    "  --tile, --tile-overlap  the video VAE's minimum tile and overlap in pixels (default 256 and 64)\n";

// The `name_<i>` tensors of `file` as a list, index i at position i; the indices must run 0..n−1.
std::vector<Tensor> indexed_tensors(const SafetensorsFile& file, const std::string& prefix) {
  std::map<int64_t, Tensor> found;
  for (const TensorInfo& t : file.tensors()) {
    if (t.name.rfind(prefix, 0) != 0) continue;
    const std::string digits = t.name.substr(prefix.size());
    size_t used = 0;
    int64_t i = -1;
    try {
      i = std::stoll(digits, &used);
    } catch (const std::exception&) {
    }
    H3_CHECK(!digits.empty() && used == digits.size() && i >= 0 && digits == std::to_string(i), "tensor '",
             t.name, "' must be ", prefix, "<i> with i a visual condition's index");
    found[i] = file.tensor(t).to_f32();
  }
  std::vector<Tensor> out;
  for (const auto& [i, t] : found) {
    H3_CHECK(i == static_cast<int64_t>(out.size()), "the ", prefix, "<i> tensors must be numbered 0, 1, ... without "
             "gaps; ", prefix, out.size(), " is missing");
    out.push_back(t);
  }
  return out;
}

InjectedNoise read_noise(const std::string& path) {
  const auto file = SafetensorsFile::open(path);
  for (const TensorInfo& t : file->tensors())
    H3_CHECK(t.name == "latents" || t.name == "audio_latents" || t.name.rfind("condition_noise_", 0) == 0 ||
                 t.name.rfind("encode_noise_", 0) == 0,
             path, ": unknown tensor '", t.name,
             "' (a noise file holds latents, audio_latents, condition_noise_<i>, encode_noise_<i>)");
  InjectedNoise n;
  if (file->find("latents")) n.video = file->tensor("latents").to_f32();
  if (file->find("audio_latents")) n.audio = file->tensor("audio_latents").to_f32();
  try {
    n.conditions = indexed_tensors(*file, "condition_noise_");
    n.encodes = indexed_tensors(*file, "encode_noise_");
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
  return n;
}

}  // namespace

int tool_generate(int argc, char** argv) {
  ToolArgs t;
  std::optional<std::string> problem =
      parse_tool_args(argc, argv, {"--model", "--request", "--noise", "--out", "--device", "--tile", "--tile-overlap"},
                      {"--model DIR", "--request REQUEST.json", "--out OUT.safetensors"}, t);
  EngineOptions options;
  if (!problem && !t.help) {
    options.model_dir = t.get("--model");
    if (t.has("--device")) options.device = t.get("--device");
    problem = check_device_option(t.get("--device"));
    if (!problem) problem = parse_pixels_option(t, "--tile", options.vae_tile);
    if (!problem) problem = parse_pixels_option(t, "--tile-overlap", options.vae_tile_overlap);
  }
  if (const auto status = usage_exit_status("generate", kUsage, problem, t.help, std::cout, std::cerr)) return *status;
  try {
    // Everything cheap first: the request, the noise, the snapshot's configs and the request's rules.
    const GenerationRequest request = read_request_json(t.get("--request"));
    std::vector<NamedPath> inputs = request_input_files(request);
    inputs.push_back({"--request", t.get("--request")});
    inputs.push_back({"--noise", t.get("--noise")});
    if (const auto clash = overwrite_problem(options.model_dir, inputs, {{"--out", t.get("--out")}})) {
      std::fprintf(stderr, "h3 tool generate: %s\n", clash->c_str());
      return 2;
    }
    const InjectedNoise noise = t.has("--noise") ? read_noise(t.get("--noise")) : InjectedNoise{};
    std::unique_ptr<Engine> engine = Engine::open(options);
    const ResolvedRequest resolved = engine->validate(request);
    std::fprintf(stderr, "h3 tool generate: %s, %lldx%lld, %lld frames, %lld passes on %s\n",
                 workflow_name(resolved.workflow), static_cast<long long>(resolved.width),
                 static_cast<long long>(resolved.height), static_cast<long long>(resolved.frames),
                 static_cast<long long>(resolved.steps), engine->backend_name().c_str());
    const GenerationResult out = engine->generate(request, {}, noise);
    write_safetensors(t.get("--out"), {{"video", out.video}, {"audio", out.audio}});
  } catch (const Error& e) {
    std::fprintf(stderr, "h3 tool generate: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace h3

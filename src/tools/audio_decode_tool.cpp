#include "tools/audio_decode_tool.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "tools/tool_args.h"
#include "util/error.h"

namespace h3 {

namespace {

constexpr const char* kUsage =
    "usage: h3 tool audio-decode --audio-vae DIR --latents IN.safetensors --out OUT.safetensors "
    "[--device cpu|cuda|auto]\n"
    "  IN holds 'audio_latents' [channels (1 or 2), latent_channels, A] in the normalized latent space;\n"
    "  OUT receives 'audio' [channels, hop*A] float32 in [-1, 1] (metadata: sampling_rate).\n";

struct Options {
  std::string audio_vae, latents, out, device = "auto";
  bool help = false;
};

// Fills `o`; returns the usage problem, if any.
std::optional<std::string> parse(int argc, char** argv, Options& o) {
  ToolArgs t;
  auto problem = parse_tool_args(argc, argv, {"--audio-vae", "--latents", "--out", "--device"},
                                 {"--audio-vae DIR", "--latents IN.safetensors", "--out OUT.safetensors"}, t);
  if (!problem) problem = check_device_option(t.get("--device"));
  o.help = t.help;
  o.audio_vae = t.get("--audio-vae");
  o.latents = t.get("--latents");
  o.out = t.get("--out");
  if (t.has("--device")) o.device = t.get("--device");
  return problem;
}

void run(const Options& o) {
  // Everything cheap is checked before the weights are read.
  const Component component = audio_vae_component_at(o.audio_vae);
  const AudioVaeConfig config = load_audio_vae_config(component);
  auto in = SafetensorsFile::open(o.latents);
  H3_CHECK(in->find("audio_latents"), o.latents, ": no tensor 'audio_latents' in this file");
  const Tensor latents = in->tensor("audio_latents");
  try {
    check_audio_latents(config, latents);
  } catch (const Error& e) {
    fail(o.latents, ": ", e.what());
  }
  const std::filesystem::path out_dir = std::filesystem::absolute(o.out).parent_path();
  H3_CHECK(std::filesystem::is_directory(out_dir), o.out, ": the output folder ", out_dir.string(), " does not exist");

  std::unique_ptr<Backend> backend = make_backend(o.device);
  const auto t0 = std::chrono::steady_clock::now();
  auto decoder = AudioVaeDecoder::load(*backend, component);
  const auto t1 = std::chrono::steady_clock::now();
  const Tensor audio = decoder->decode(latents);
  const auto t2 = std::chrono::steady_clock::now();
  write_safetensors(o.out, {{"audio", audio}}, {{"sampling_rate", std::to_string(config.sampling_rate)}});

  const double seconds = double(audio.dim(1)) / double(config.sampling_rate);
  std::fprintf(stderr, "audio-decode: %lld x %lld samples (%.3f s at %lld Hz) on %s: load %.2f s, decode %.2f s -> %s\n",
               static_cast<long long>(audio.dim(0)), static_cast<long long>(audio.dim(1)), seconds,
               static_cast<long long>(config.sampling_rate), backend->name().c_str(),
               std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
               o.out.c_str());
}

}  // namespace

int tool_audio_decode(int argc, char** argv) {
  Options o;
  const auto problem = parse(argc, argv, o);
  if (const auto status = usage_exit_status("audio-decode", kUsage, problem, o.help, std::cout, std::cerr))
    return *status;
  try {
    run(o);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "h3 tool audio-decode: %s\n", e.what());
    return 1;
  }
}

}  // namespace h3

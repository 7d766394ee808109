#include "tools/audio_decode_tool.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae_decoder.h"
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
};

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "h3 tool audio-decode: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

// Fills `o`; returns an error message, or "" when the arguments are complete.
std::string parse(int argc, char** argv, Options& o, bool& help) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      help = true;
      return "";
    }
    std::string* slot = a == "--audio-vae" ? &o.audio_vae
                        : a == "--latents" ? &o.latents
                        : a == "--out"     ? &o.out
                        : a == "--device"  ? &o.device
                                           : nullptr;
    if (!slot) return "unknown argument '" + a + "'";
    if (i + 1 >= argc) return a + " needs a value";
    *slot = argv[++i];
  }
  if (o.audio_vae.empty()) return "--audio-vae DIR is required";
  if (o.latents.empty()) return "--latents IN.safetensors is required";
  if (o.out.empty()) return "--out OUT.safetensors is required";
  if (o.device != "cpu" && o.device != "cuda" && o.device != "auto")
    return "--device must be cpu, cuda or auto, got '" + o.device + "'";
  return "";
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
  bool help = false;
  const std::string err = parse(argc, argv, o, help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!err.empty()) return usage_error(err);
  try {
    run(o);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "h3 tool audio-decode: %s\n", e.what());
    return 1;
  }
}

}  // namespace h3

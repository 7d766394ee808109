#include "tools/vae_decode_tool.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "models/video_vae/decoder.h"
#include "tools/tool_args.h"
#include "util/error.h"

namespace h3 {

namespace {

constexpr const char* kUsage =
    "usage: h3 tool vae-decode --vae DIR --latents IN.safetensors --out OUT.safetensors\n"
    "                          [--tile PX] [--tile-overlap PX] [--device cpu|cuda|auto]\n"
    "  DIR        a diffusers vae/ folder or an original video_vae/ folder\n"
    "  IN         holds `latents` [1, C, F, h, w], normalized (the pipeline's latent space)\n"
    "  OUT        receives `video` [1, 3, frames, 16h, 16w] float32 in [0, 1]\n"
    "  --tile, --tile-overlap  minimum tile size and minimum overlap in pixels (default 256 and 64)\n";

struct Args {
  std::string vae, latents, out, device = "auto";
  TileOptions tiles;
  bool help = false;
};

// Fills `a`; returns the usage problem, if any.
std::optional<std::string> parse(int argc, char** argv, Args& a) {
  ToolArgs t;
  auto problem =
      parse_tool_args(argc, argv, {"--vae", "--latents", "--out", "--device", "--tile", "--tile-overlap"},
                      {"--vae DIR", "--latents IN.safetensors", "--out OUT.safetensors"}, t);
  a.help = t.help;
  if (problem || a.help) return problem;
  a.vae = t.get("--vae");
  a.latents = t.get("--latents");
  a.out = t.get("--out");
  if (t.has("--device")) a.device = t.get("--device");
  problem = check_device_option(t.get("--device"));
  if (!problem) problem = parse_pixels_option(t, "--tile", a.tiles.tile);
  if (!problem) problem = parse_pixels_option(t, "--tile-overlap", a.tiles.tile_overlap);
  return problem;
}

}  // namespace

int tool_vae_decode(int argc, char** argv) {
  Args args;
  const auto problem = parse(argc, argv, args);
  if (const auto status = usage_exit_status("vae-decode", kUsage, problem, args.help, std::cout, std::cerr))
    return *status;
  try {
    const auto input = SafetensorsFile::open(args.latents);
    H3_CHECK(input->find("latents"), args.latents, ": no tensor named 'latents'");
    const Tensor latents = input->tensor("latents");
    H3_CHECK(latents.ndim() == 5 && latents.dim(0) == 1, args.latents, ": 'latents' must be [1, C, F, h, w], got ",
             latents.str());
    const Tensor per_video = latents.reshape({latents.dim(1), latents.dim(2), latents.dim(3), latents.dim(4)});

    const Component component = video_vae_component_at(args.vae);
    validate_video_vae_decode(load_video_vae_config(component), per_video, args.tiles);

    std::unique_ptr<Backend> backend = make_backend(args.device);
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<VideoVaeDecoder> vae = VideoVaeDecoder::load(*backend, component);
    const auto t1 = std::chrono::steady_clock::now();
    const Tensor video = vae->decode(per_video, args.tiles);
    const auto t2 = std::chrono::steady_clock::now();
    const Tensor batched = video.reshape({1, video.dim(0), video.dim(1), video.dim(2), video.dim(3)});
    write_safetensors(args.out, {{"video", batched}});
    auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    std::fprintf(stderr, "h3 tool vae-decode: %s -> video %s on %s (load %.3f s, decode %.3f s)\n",
                 latents.str().c_str(), shape_str(batched.shape()).c_str(), backend->name().c_str(), secs(t0, t1),
                 secs(t1, t2));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "h3 tool vae-decode: %s\n", e.what());
    return 1;
  }
}

}  // namespace h3

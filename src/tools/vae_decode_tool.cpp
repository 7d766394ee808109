#include "tools/vae_decode_tool.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "models/video_vae/decoder.h"
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
};

int64_t parse_pixels(const std::string& flag, const std::string& value) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  H3_CHECK(used == value.size() && !value.empty(), flag, " takes a whole number of pixels, got '", value, "'");
  return v;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      H3_CHECK(i + 1 < argc, flag, " needs a value");
      return argv[++i];
    };
    if (flag == "--vae") a.vae = value();
    else if (flag == "--latents") a.latents = value();
    else if (flag == "--out") a.out = value();
    else if (flag == "--device") a.device = value();
    else if (flag == "--tile") a.tiles.tile = parse_pixels(flag, value());
    else if (flag == "--tile-overlap") a.tiles.tile_overlap = parse_pixels(flag, value());
    else fail("unknown option '", flag, "'");
  }
  H3_CHECK(!a.vae.empty() && !a.latents.empty() && !a.out.empty(), "--vae, --latents and --out are required");
  return a;
}

}  // namespace

int tool_vae_decode(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "h3 tool vae-decode: %s\n%s", e.what(), kUsage);
    return 2;
  }
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

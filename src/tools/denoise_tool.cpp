#include "tools/tool_args.h"
#include "tools/denoise_tool.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "models/dit/dit.h"
#include "pipeline/precision.h"
#include "pipeline/dit_velocity.h"
#include "pipeline/layout.h"
#include "pipeline/sampler.h"
#include "util/error.h"

namespace h3 {

namespace {

constexpr std::string_view kUsage =
    R"(usage: h3 tool denoise --transformer DIR --case CASE.safetensors --out OUT.safetensors [--device cpu|cuda|auto]
                       [--precision bf16|fp8]

Runs the MiniMax-H3 t2va denoising loop (packed layout, video schedule shift 12, audio schedule shift 3, one
transformer pass per step, Euler updates) from the initial noise in CASE and writes the final latents to OUT.

  --transformer DIR  a transformer folder: config.json + safetensors weights, diffusers or original naming
  --case FILE        safetensors with
                       prompt_embeds (1, Nt, text_dim)            the text rows (all tagged text, or
                       text_token_tags (Nt), optional              their tags: 1 text, 0 vision block)
                       latents (1, C, F, H/16, W/16)              initial video noise, normalized latent space
                       audio_latents (2, Ca, A)                   initial audio noise, normalized latent space
                       height, width, num_frames                  pixels; num_frames = 17n + 5 at 24 fps
                       num_inference_steps                        grid points (N points = N - 1 transformer passes)
                     scalars as 0-d or 1-element integer tensors; C, Ca, text_dim and the patch from the transformer
  --out FILE         receives latents (1, C, F, H/16, W/16) and audio_latents (2, Ca, A), float32, written
                     atomically (nothing is written when anything fails)
  --device NAME      cpu, cuda or auto (default auto: CUDA when available)
  --precision P      bf16 (default) or fp8: the transformer's products (and, on Hopper, its attention) in FP8
                     (a GPU of compute capability 8.9 or newer; elsewhere refused before any work)
  --help             show this help
)";

// The reference's num_inference_steps bounds: at least 1 transformer pass, at most our 1000.
constexpr int64_t kMinGridPoints = 2;
constexpr int64_t kMaxGridPoints = 1001;


struct DenoiseCase {
  LatentGeometry geometry;
  int64_t grid_points = 0;
  Tensor text;                     // [Nt, text_dim]
  std::vector<int64_t> text_tags;  // empty = all text
  Tensor latents, audio_latents;
};

class CaseReader {
 public:
  explicit CaseReader(const std::string& path) : file_(SafetensorsFile::open(path)) {}

  bool has(const char* name) const { return file_->find(name) != nullptr; }
  Tensor get(const char* name) const {
    H3_CHECK(has(name), "tensor '", name, "' is missing");
    return file_->tensor(name);
  }
  Tensor floating(const char* name, size_t rank) const {
    Tensor t = get(name);
    H3_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64 || t.dtype() == DType::BF16 ||
                 t.dtype() == DType::F16,
             "tensor '", name, "' must be a float tensor, got ", t.str());
    H3_CHECK(t.ndim() == static_cast<int>(rank), "tensor '", name, "' must have ", rank, " dimensions, got ", t.str());
    return t.to_f32();
  }
  // A 0-d or 1-element tensor holding an integer.
  int64_t scalar(const char* name) const {
    Tensor t = get(name);
    H3_CHECK(t.numel() == 1 && t.ndim() <= 1, "tensor '", name, "' must be a scalar (0-d or 1 element), got ",
             t.str());
    const double v = t.at(0);
    H3_CHECK(std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15, "tensor '", name,
             "' must hold an integer, got ", v);
    return static_cast<int64_t>(v);
  }
  std::vector<int64_t> tags(const char* name) const {
    Tensor t = get(name);
    H3_CHECK(t.ndim() == 1 && (t.dtype() == DType::I64 || t.dtype() == DType::I32), "tensor '", name,
             "' must be a one-dimensional I64 or I32 tensor, got ", t.str());
    std::vector<int64_t> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<int64_t>(t.at(i));
    return v;
  }

 private:
  std::shared_ptr<SafetensorsFile> file_;
};

DenoiseCase read_case(const std::string& path, const DitConfig& cfg) {
  try {
    const CaseReader c(path);
    const int64_t height = c.scalar("height"), width = c.scalar("width"), frames = c.scalar("num_frames");
    DenoiseCase out;
    out.grid_points = c.scalar("num_inference_steps");
    H3_CHECK(out.grid_points >= kMinGridPoints && out.grid_points <= kMaxGridPoints,
             "num_inference_steps (grid points) must be between ", kMinGridPoints, " and ", kMaxGridPoints, ", got ",
             out.grid_points);
    H3_CHECK(frames >= 1 && is_aligned_frame_count(frames), "num_frames must be of the form 17·n + 5, got ", frames);
    out.geometry = LatentGeometry::make(width, height, frames, cfg.patch_size, cfg.in_channels, cfg.audio_in_channels);
    const LatentGeometry& g = out.geometry;

    const Tensor text = c.floating("prompt_embeds", 3);
    H3_CHECK(text.dim(0) == 1 && text.dim(1) >= 1 && text.dim(2) == cfg.text_dim,
             "tensor 'prompt_embeds' must be (1, Nt, ", cfg.text_dim, ") with Nt ≥ 1, got ", text.str());
    out.text = text.reshape({text.dim(1), text.dim(2)});
    if (c.has("text_token_tags")) {
      out.text_tags = c.tags("text_token_tags");
      H3_CHECK(static_cast<int64_t>(out.text_tags.size()) == out.text.dim(0), "tensor 'text_token_tags' has ",
               out.text_tags.size(), " entries for ", out.text.dim(0), " text rows");
    }
    out.latents = c.floating("latents", 5);
    H3_CHECK(out.latents.shape() == g.video_latent_shape(), "tensor 'latents' must be ",
             shape_str(g.video_latent_shape()), " for ", width, "×", height, " and ", frames,
             " frames with the transformer's ", cfg.in_channels, " channels, got ", out.latents.str());
    out.audio_latents = c.floating("audio_latents", 3);
    H3_CHECK(out.audio_latents.shape() == g.audio_latent_shape(), "tensor 'audio_latents' must be ",
             shape_str(g.audio_latent_shape()), " for ", frames, " frames with the transformer's ",
             cfg.audio_in_channels, " audio channels, got ", out.audio_latents.str());
    return out;
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

}  // namespace

int tool_denoise(int argc, char** argv) {
  TransformerCaseArgs args;
  if (const auto status = parse_transformer_case_tool("denoise", kUsage, argc, argv, args)) return *status;
  try {
    const Component transformer = dit_component_from_dir(args.transformer);
    const DenoiseCase dc = read_case(args.case_path, load_dit_config(transformer));
    std::unique_ptr<Backend> be = make_backend(args.device);
    DitOptions dit_options;
    dit_options.precision = resolve_dit_precision(args.precision, *be);
    std::unique_ptr<Dit> dit = Dit::load(*be, transformer, dit_options);
    DitVelocityModel model(*dit);

    LayoutSpec spec;
    spec.text_tags = dc.text_tags.empty() ? std::vector<int64_t>(static_cast<size_t>(dc.text.dim(0)), kTagText)
                                          : dc.text_tags;
    spec.target = dc.geometry;
    const PackedLayout layout = build_layout(spec);
    const auto [video_schedule, audio_schedule] = make_schedules(dc.grid_points - 1);
    NoiseInputs noise;
    noise.video = dc.latents;
    noise.audio = dc.audio_latents;

    const auto t0 = std::chrono::steady_clock::now();
    const DenoiseResult out = denoise(model, layout, dc.text, video_schedule, audio_schedule, dc.geometry,
                                      initial_state(dc.geometry, {}, noise));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "h3 tool denoise: %lld passes in %.3f s on %s (L = %lld)\n",
                 static_cast<long long>(video_schedule.passes()), seconds, be->name().c_str(),
                 static_cast<long long>(layout.length()));
    write_safetensors(args.out, {{"latents", out.latents}, {"audio_latents", out.audio_latents}});
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "h3 tool denoise: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace h3

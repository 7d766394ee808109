#include "models/video_vae/encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "io/manifest.h"
#include "models/random_weights.h"
#include "models/video_vae/decoder.h"
#include "models/video_vae/stitch.h"
#include "pipeline/rng.h"
#include "util/cancel.h"
#include "util/error.h"
#include "util/log.h"

namespace h3 {

namespace {

// Every convolution of the encoder but the 1×1×1 ones has a 3×3×3 kernel; the causal temporal padding is kt − 1
// zero frames (MiniMaxH3VideoCausalConv3d), the symmetric spatial padding 1 (none in the downsampler, which pads
// bottom and right by 1 itself when its spatial stride is 2).
constexpr int64_t kKernel = 3;
constexpr int64_t kCausalPad = kKernel - 1;

PadMode pad_mode_of(const std::string& mode) {
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "replicate") return PadMode::Replicate;
  if (mode == "constant") return PadMode::Zeros;
  fail("video VAE: spatial_padding_mode must be 'reflect', 'replicate' or 'constant', got '", mode, "'");
}

// conv_in, the ResNet convolutions and conv_out: stride 1, spatial pad 1 on every side, causal temporal pad.
Conv3dGeometry same_size_geometry(PadMode mode) {
  Conv3dGeometry g;
  g.pad_front = kCausalPad;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
  g.spatial_mode = mode;
  return g;
}

// MiniMaxH3VideoDownsample3d: a bottom/right pad of 1 (spatial stride 2 only), causal temporal pad, strides.
Conv3dGeometry downsampler_geometry(PadMode mode, int64_t temporal, int64_t spatial) {
  Conv3dGeometry g;
  g.stride_t = temporal;
  g.stride_h = g.stride_w = spatial;
  g.pad_front = kCausalPad;
  g.pad_bottom = g.pad_right = spatial == 2 ? 1 : 0;
  g.spatial_mode = mode;
  return g;
}

bool has_downsampler(const VideoVaeConfig& c, size_t level) {
  return c.temporal_downsample_factors[level] * c.spatial_downsample_factors[level] > 1;
}

// The output [T, H, W] of a convolution with a k³ kernel.
std::array<int64_t, 3> conv_shape(const std::array<int64_t, 3>& in, int64_t k, const Conv3dGeometry& g) {
  return conv3d_output_shape(in[0], in[1], in[2], k, k, k, g);
}

// [T, H, W] of the moments of one tile of [T, H, W] pixels.
std::array<int64_t, 3> moments_shape(const VideoVaeConfig& c, std::array<int64_t, 3> s) {
  const PadMode mode = pad_mode_of(c.spatial_padding_mode);
  for (size_t i = 0; i < c.block_out_channels.size(); ++i)
    if (has_downsampler(c, i))
      s = conv_shape(s, kKernel,
                     downsampler_geometry(mode, c.temporal_downsample_factors[i], c.spatial_downsample_factors[i]));
  return s;
}

// Copies [C, t0 .. t0 + n, y0 .. y0 + h, x0 .. x0 + w) of a host F32 [C, T, H, W] tensor; frames past T repeat the
// last frame (the reference's clip padding).
Tensor crop(const Tensor& src, int64_t t0, int64_t n, int64_t y0, int64_t h, int64_t x0, int64_t w) {
  const int64_t C = src.dim(0), T = src.dim(1), H = src.dim(2), W = src.dim(3);
  Tensor out = Tensor::empty({C, n, h, w}, DType::F32);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t t = 0; t < n; ++t) {
      const float* from = src.ptr<float>() + ((c * T + std::min(t0 + t, T - 1)) * H + y0) * W + x0;
      float* to = out.ptr<float>() + (c * n + t) * h * w;
      for (int64_t y = 0; y < h; ++y) std::memcpy(to + y * w, from + y * W, w * sizeof(float));
    }
  return out;
}

// Latent frames [0, keep) of every channel of [C, T, h, w] pieces, concatenated along time ([C, Σ T, h, w]).
Tensor concat_frames(const std::vector<Tensor>& pieces, int64_t keep) {
  const int64_t C = pieces[0].dim(0), plane = pieces[0].dim(2) * pieces[0].dim(3);
  Tensor out = Tensor::empty({C, keep, pieces[0].dim(2), pieces[0].dim(3)}, DType::F32);
  int64_t t0 = 0;
  for (const Tensor& p : pieces) {
    const int64_t n = std::min(p.dim(1), keep - t0);
    for (int64_t c = 0; c < C && n > 0; ++c)
      std::memcpy(out.ptr<float>() + (c * keep + t0) * plane, p.ptr<float>() + c * p.dim(1) * plane,
                  n * plane * sizeof(float));
    t0 += std::max<int64_t>(n, 0);
  }
  return out;
}

// Pixel splits mapped onto the latent grid (the reference divides starts and overlaps by s).
TileSplit latent_split(const TileSplit& px, int64_t s, int64_t latent_length) {
  TileSplit l;
  for (int64_t v : px.starts) l.starts.push_back(v / s);
  for (int64_t v : px.overlaps) l.overlaps.push_back(v / s);
  l.length = latent_length;
  return l;
}

Tensor noise_for(const Tensor* eps, const Shape& shape) {
  if (!eps) return NoiseStream(kVisualConditionSeed).draw(shape);
  H3_CHECK(eps->device() == Device::CPU && dtype_is_float(eps->dtype()) && eps->numel() == shape_numel(shape),
           "video VAE encode: eps must be a host float tensor of ", shape_numel(shape), " values (",
           shape_str(shape), "), got ", eps->str());
  return eps->to(DType::F32);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Validation and the recipe around the encode

void validate_video_vae_encode(const VideoVaeConfig& config, int64_t frames, int64_t height, int64_t width,
                               const EncodeTileOptions& o) {
  const int64_t s = config.spatial_ratio();
  H3_CHECK(frames >= 1, "video VAE encode: at least one frame is needed, got ", frames);
  H3_CHECK(height >= 2 * s && width >= 2 * s && height % s == 0 && width % s == 0, "video VAE encode: the frame ",
           "size must be a multiple of ", s, " px and at least ", 2 * s, " px on both sides, got ", width, "x", height);
  H3_CHECK(o.tile >= 2 * s && o.tile % s == 0, "video VAE encode: the tile size must be a multiple of ", s,
           " px and at least ", 2 * s, " px, got ", o.tile, " px");
  H3_CHECK(o.tile_overlap >= 0 && o.tile_overlap < o.tile && o.tile_overlap % s == 0,
           "video VAE encode: the tile overlap must be a multiple of ", s, " px in [0, tile = ", o.tile, "), got ",
           o.tile_overlap, " px");
}

Tensor imagenet_normalized_pixels(const Rgb8Video& v) {
  H3_CHECK(v.frames >= 1 && v.width >= 1 && v.height >= 1 &&
               v.rgb.size() == static_cast<size_t>(v.frames) * v.frame_bytes(),
           "video VAE encode: the frames must be ", v.frames, " non-empty RGB24 pictures of ", v.width, "x", v.height,
           " (", static_cast<size_t>(v.frames) * v.frame_bytes(), " bytes), got ", v.rgb.size(), " bytes");
  const int64_t F = v.frames, plane = static_cast<int64_t>(v.width) * v.height;
  Tensor out = Tensor::empty({3, F, v.height, v.width}, DType::F32);
  float* dst = out.ptr<float>();
  for (int64_t c = 0; c < 3; ++c) {
    const float mean = kImageNetMean[c], std = kImageNetStd[c];
    for (int64_t f = 0; f < F; ++f)
      for (int64_t k = 0; k < plane; ++k)
        dst[(c * F + f) * plane + k] = (static_cast<float>(v.rgb[(f * plane + k) * 3 + c]) / 255.f - mean) / std;
  }
  return out;
}

VisualConditionStages round_and_normalize_condition(const VideoVaeConfig& config, const Tensor& sampled) {
  H3_CHECK(sampled.device() == Device::CPU && sampled.dtype() == DType::F32 && sampled.ndim() == 4 &&
               sampled.dim(0) == config.latent_channels,
           "video VAE: a sampled condition must be host F32 [", config.latent_channels, ", F, h, w], got ",
           sampled.str());
  VisualConditionStages st;
  st.sampled = sampled;
  st.rounded = Tensor::empty(sampled.shape(), DType::F32);
  st.normalized = Tensor::empty(sampled.shape(), DType::F32);
  const int64_t per_channel = sampled.numel() / sampled.dim(0);
  for (int64_t c = 0; c < sampled.dim(0); ++c) {
    // The reference normalizes with float32 tensors of the config's values.
    const float mean = static_cast<float>(config.latents_mean[c]), std = static_cast<float>(config.latents_std[c]);
    for (int64_t i = c * per_channel; i < (c + 1) * per_channel; ++i) {
      const float r = round_f16(sampled.ptr<float>()[i]);
      st.rounded.ptr<float>()[i] = r;
      st.normalized.ptr<float>()[i] = (r - mean) / std;
    }
  }
  return st;
}

VisualConditionStages sample_visual_condition(const VideoVaeConfig& config, const VideoVaePosterior& posterior,
                                              const Tensor* eps) {
  const Tensor& mean = posterior.mean;
  H3_CHECK(posterior.logvar.shape() == mean.shape() && mean.ndim() == 4, "video VAE: posterior mean ", mean.str(),
           " and log-variance ", posterior.logvar.str(), " must share one [C, F, h, w] shape");
  const Tensor e = noise_for(eps, {1, mean.dim(0), mean.dim(1), mean.dim(2), mean.dim(3)});
  Tensor z = Tensor::empty(mean.shape(), DType::F32);
  for (int64_t i = 0; i < z.numel(); ++i) {
    const float std = std::exp(0.5f * posterior.logvar.ptr<float>()[i]);
    const float noise = std * e.ptr<float>()[i];  // two roundings, as the reference's mean + std * sample
    z.ptr<float>()[i] = mean.ptr<float>()[i] + noise;
  }
  return round_and_normalize_condition(config, z);
}

// ---------------------------------------------------------------------------------------------------------------
// Construction

VideoVaeEncoder::VideoVaeEncoder(Backend& backend, const VideoVaeConfig& config)
    : backend_(backend), config_(config), geometry_(video_vae_geometry(config)) {
  config.validate("video VAE encoder config");
  groups_ = config.norm_num_groups;
  eps_ = static_cast<float>(config.norm_eps);
}

std::unique_ptr<VideoVaeEncoder> VideoVaeEncoder::load(Backend& backend, const Component& vae) {
  H3_CHECK(vae.present, "video VAE: component '", vae.name, "' is missing");
  const VideoVaeConfig config = load_video_vae_config(vae);
  return create(backend, config, video_vae_source(vae, config));
}

std::unique_ptr<VideoVaeEncoder> VideoVaeEncoder::create(Backend& backend, const VideoVaeConfig& config,
                                                         const VideoVaeTensorSource& tensors) {
  // A tensor by diffusers name, shape-checked, uploaded as F32.
  return build(backend, config, [&](const std::string& name, const Shape& want) {
    const Tensor t = tensors(name);
    H3_CHECK(dtype_is_float(t.dtype()), "video VAE: tensor '", name, "' is ", t.str(), ", expected a float tensor");
    H3_CHECK(t.shape() == want, "video VAE: tensor '", name, "' has shape ", shape_str(t.shape()), ", expected ",
             shape_str(want));
    return backend.upload(t, DType::F32);
  });
}

std::unique_ptr<VideoVaeEncoder> VideoVaeEncoder::random(Backend& backend, VideoVaeConfig config, uint64_t seed) {
  if (config.latents_mean.empty()) config.latents_mean.assign(config.latent_channels, 0.0);
  if (config.latents_std.empty()) config.latents_std.assign(config.latent_channels, 1.0);
  config.validate("random video VAE config");
  RandomWeights rw(backend, seed);
  return build(backend, config, [&](const std::string& name, const Shape& shape) {
    if (name.ends_with("norm1.weight") || name.ends_with("norm2.weight") || name.ends_with("norm_out.weight"))
      return rw.norm(name, shape, DType::F32);
    if (name.ends_with(".bias")) return rw.bias(name, shape, DType::F32);
    return rw.matrix(name, shape, DType::F32, shape_numel(shape) / shape[0]);  // [Cout, Cin, kt, kh, kw]
  });
}

std::unique_ptr<VideoVaeEncoder> VideoVaeEncoder::build(Backend& backend, const VideoVaeConfig& config,
                                                        const TensorMaker& make) {
  std::unique_ptr<VideoVaeEncoder> e(new VideoVaeEncoder(backend, config));
  std::map<std::string, Shape> expected;
  for (const TensorSpec& s : video_vae_manifest(config, Layout::Diffusers, /*with_encoder=*/true))
    expected[s.name] = s.shape;
  auto load = [&](const std::string& name) { return make(name, expected.at(name)); };
  auto conv = [&](const std::string& prefix, const Conv3dGeometry& g) {
    return Conv{load(prefix + ".weight"), load(prefix + ".bias"), g};
  };
  const PadMode mode = pad_mode_of(config.spatial_padding_mode);
  const Conv3dGeometry same = same_size_geometry(mode), pointwise{};
  e->conv_in_ = conv("encoder.conv_in", same);
  const auto& ch = config.block_out_channels;
  for (size_t i = 0; i < ch.size(); ++i) {
    Level level;
    for (int64_t j = 0; j < config.layers_per_block; ++j) {
      const std::string p = cat("encoder.down_blocks.", i, ".resnets.", j);
      const int64_t cin = j == 0 ? ch[i == 0 ? 0 : i - 1] : ch[i];
      ResBlock b;
      b.norm1_w = load(p + ".norm1.weight");
      b.norm1_b = load(p + ".norm1.bias");
      b.conv1 = conv(p + ".conv1", same);
      b.norm2_w = load(p + ".norm2.weight");
      b.norm2_b = load(p + ".norm2.bias");
      b.conv2 = conv(p + ".conv2", same);
      b.has_shortcut = cin != ch[i];
      if (b.has_shortcut) b.shortcut = conv(p + ".conv_shortcut", pointwise);
      level.resnets.push_back(std::move(b));
    }
    level.has_downsampler = has_downsampler(config, i);
    if (level.has_downsampler)
      level.downsampler =
          conv(cat("encoder.down_blocks.", i, ".downsamplers.0.conv"),
               downsampler_geometry(mode, config.temporal_downsample_factors[i], config.spatial_downsample_factors[i]));
    e->levels_.push_back(std::move(level));
  }
  e->norm_out_w_ = load("encoder.norm_out.weight");
  e->norm_out_b_ = load("encoder.norm_out.bias");
  e->conv_out_ = conv("encoder.conv_out", same);
  e->quant_conv_ = conv("quant_conv", pointwise);
  return e;
}

// ---------------------------------------------------------------------------------------------------------------
// The network on one tile

Tensor VideoVaeEncoder::conv(const Conv& c, const Tensor& x) {
  const auto [T, H, W] = conv3d_output_shape(x.dim(1), x.dim(2), x.dim(3), c.w.dim(2), c.w.dim(3), c.w.dim(4), c.g);
  Tensor y = backend_.empty({c.w.dim(0), T, H, W}, DType::F32);
  backend_.conv3d(x, c.w, &c.b, c.g, y);
  return y;
}

// h = conv2(SiLU(norm2(conv1(SiLU(norm1(x)))))); out = shortcut(x) + h (MiniMaxH3VideoResnetBlock3d).
Tensor VideoVaeEncoder::resnet(const ResBlock& b, const Tensor& x) {
  Backend& be = backend_;
  Tensor h;
  {
    Tensor a = be.empty(x.shape(), DType::F32);
    be.frame_group_norm(x, b.norm1_w, b.norm1_b, groups_, eps_, /*silu=*/true, a);
    h = conv(b.conv1, a);
  }
  be.frame_group_norm(h, b.norm2_w, b.norm2_b, groups_, eps_, /*silu=*/true, h);
  Tensor out = conv(b.conv2, h);
  h = Tensor();
  if (b.has_shortcut)
    be.residual_add(out, conv(b.shortcut, x), nullptr);
  else
    be.residual_add(out, x, nullptr);
  return out;
}

Tensor VideoVaeEncoder::forward(const Tensor& pixels) {
  Tensor h = conv(conv_in_, pixels);
  for (const Level& level : levels_) {
    for (const ResBlock& b : level.resnets) {
      throw_if_cancelled();  // between residual blocks of a tile
      h = resnet(b, h);
    }
    if (level.has_downsampler) h = conv(level.downsampler, h);
  }
  backend_.frame_group_norm(h, norm_out_w_, norm_out_b_, groups_, eps_, /*silu=*/true, h);
  h = conv(conv_out_, h);
  return conv(quant_conv_, h);
}

// ---------------------------------------------------------------------------------------------------------------
// Tiles, clips and the posterior

Tensor VideoVaeEncoder::encode_tile(const Tensor& pixels) {
  H3_CHECK(pixels.device() == Device::CPU && pixels.dtype() == DType::F32 && pixels.ndim() == 4 &&
               pixels.dim(0) == config_.in_channels,
           "video VAE encode: a tile must be host F32 [", config_.in_channels, ", frames, height, width], got ",
           pixels.str());
  return backend_.download(forward(backend_.upload(pixels, DType::F32)));
}

Tensor VideoVaeEncoder::encode_clip(const Tensor& clip, const EncodeTileOptions& o) {
  const int64_t s = geometry_.spatial_ratio, T = clip.dim(1), H = clip.dim(2), W = clip.dim(3);
  const TileSplit ys = split_tiles(H, o.tile, o.tile_overlap, s), xs = split_tiles(W, o.tile, o.tile_overlap, s);
  std::vector<Tensor> tiles;
  for (int64_t y0 : ys.starts)
    for (int64_t x0 : xs.starts) {
      tiles.push_back(encode_tile(crop(clip, 0, T, y0, ys.length, x0, xs.length)));
    }
  const int64_t lh = tiles[0].dim(2), lw = tiles[0].dim(3);
  return stitch_tiles(tiles, latent_split(ys, s, lh), latent_split(xs, s, lw));
}

int64_t VideoVaeEncoder::latent_tokens_per_clip(const VideoVaeConfig& config) {
  const int64_t s = config.spatial_ratio();  // any valid frame size: the time axis does not depend on it
  return moments_shape(config, {config.clip_length, 2 * s, 2 * s})[0];
}

int64_t VideoVaeEncoder::latent_frames(const VideoVaeConfig& config, int64_t frames) {
  H3_CHECK(frames >= 1, "video VAE encode: at least one frame is needed, got ", frames);
  const int64_t s = config.spatial_ratio();
  if (frames == 1) return moments_shape(config, {1, 2 * s, 2 * s})[0];
  const int64_t clips = (frames + config.clip_length - 1) / config.clip_length;
  return clips * latent_tokens_per_clip(config) - config.token_drop;
}

VideoVaePosterior VideoVaeEncoder::encode(const Tensor& pixels, const EncodeTileOptions& o) {
  H3_CHECK(pixels.device() == Device::CPU && pixels.dtype() == DType::F32 && pixels.ndim() == 4 &&
               pixels.dim(0) == config_.in_channels,
           "video VAE encode: pixels must be host F32 [", config_.in_channels, ", frames, height, width], got ",
           pixels.str());
  const int64_t F = pixels.dim(1), H = pixels.dim(2), W = pixels.dim(3);
  validate_video_vae_encode(config_, F, H, W, o);
  const int64_t keep = latent_frames(F);
  H3_CHECK(keep >= 1, "video VAE encode: ", F, " frames leave no latent frame after dropping token_drop = ",
           config_.token_drop);
  // One frame is one clip of one frame (no padding, nothing dropped); a stack is cut into clips of clip_length
  // frames, the last one padded by repeating the last frame (§7).
  const int64_t clip = F == 1 ? 1 : config_.clip_length, clips = (F + clip - 1) / clip;
  log_debug("video VAE encode: ", F, " frames of ", W, "x", H, " in ", clips, " clip(s) -> ", keep, " latent frames");
  std::vector<Tensor> moments;
  for (int64_t k = 0; k < clips; ++k) moments.push_back(encode_clip(crop(pixels, k * clip, clip, 0, H, 0, W), o));
  const Tensor all = concat_frames(moments, keep);

  // Channels [0, C) are the mean, [C, 2C) the log-variance (DiagonalGaussianDistribution).
  const int64_t C = config_.latent_channels, half = all.numel() / 2;
  const Shape shape = {C, keep, all.dim(2), all.dim(3)};
  VideoVaePosterior p{Tensor::empty(shape, DType::F32), Tensor::empty(shape, DType::F32)};
  std::memcpy(p.mean.data(), all.data(), half * sizeof(float));
  const float* lv = all.ptr<float>() + half;
  for (int64_t i = 0; i < half; ++i)
    p.logvar.ptr<float>()[i] = std::clamp(lv[i], kPosteriorLogvarMin, kPosteriorLogvarMax);
  return p;
}

Tensor VideoVaeEncoder::encode_visual_condition(const Rgb8Video& frames, const Tensor* eps,
                                                const EncodeTileOptions& o) {
  validate_video_vae_encode(config_, frames.frames, frames.height, frames.width, o);
  const VideoVaePosterior posterior = encode(imagenet_normalized_pixels(frames), o);
  const Tensor normalized = sample_visual_condition(config_, posterior, eps).normalized;
  return normalized.reshape({1, normalized.dim(0), normalized.dim(1), normalized.dim(2), normalized.dim(3)});
}

Tensor VideoVaeEncoder::encode_visual_condition(const Rgb8Image& image, const Tensor* eps,
                                                const EncodeTileOptions& o) {
  Rgb8Video one;
  one.width = image.width;
  one.height = image.height;
  one.frames = 1;
  one.rgb = image.rgb;
  return encode_visual_condition(one, eps, o);
}

// ---------------------------------------------------------------------------------------------------------------
// Memory

uint64_t VideoVaeEncoder::weight_bytes(const VideoVaeConfig& config) {
  uint64_t elements = 0;
  for (const TensorSpec& s : video_vae_manifest(config, Layout::Diffusers, /*with_encoder=*/true))
    if (s.name.starts_with("encoder.") || s.name.starts_with("quant_conv.")) elements += shape_numel(s.shape);
  return elements * sizeof(float);
}

uint64_t VideoVaeEncoder::encode_workspace_bytes(const VideoVaeConfig& c, int64_t frames, int64_t height,
                                                 int64_t width, const EncodeTileOptions& o) {
  validate_video_vae_encode(c, frames, height, width, o);
  c.validate("video VAE encoder config");
  const PadMode mode = pad_mode_of(c.spatial_padding_mode);
  const Conv3dGeometry same = same_size_geometry(mode);
  const int64_t s = c.spatial_ratio();
  std::array<int64_t, 3> shape = {frames == 1 ? 1 : c.clip_length,
                                  split_tiles(height, o.tile, o.tile_overlap, s).length,
                                  split_tiles(width, o.tile, o.tile_overlap, s).length};
  auto numel = [](int64_t channels, const std::array<int64_t, 3>& t) {
    return static_cast<uint64_t>(channels) * t[0] * t[1] * t[2];
  };
  // The padded copy a convolution of `g` reads (backends that pad into a scratch buffer).
  auto padded = [&](int64_t channels, const std::array<int64_t, 3>& t, const Conv3dGeometry& g) {
    return numel(channels, {t[0] + g.pad_front, t[1] + g.pad_top + g.pad_bottom, t[2] + g.pad_left + g.pad_right});
  };
  // The tile's pixels stay alive through its forward; conv_in reads their padded copy.
  const uint64_t pixels = numel(c.in_channels, shape);
  uint64_t peak = padded(c.in_channels, shape, same) + numel(c.block_out_channels[0], shape);
  int64_t channels = c.block_out_channels[0];
  for (size_t i = 0; i < c.block_out_channels.size(); ++i) {
    const int64_t co = c.block_out_channels[i];
    for (int64_t j = 0; j < c.layers_per_block; ++j) {
      // conv1: x, its normalized copy, that copy padded, h; conv2: x, h, h padded, out; shortcut: x, out, s.
      const uint64_t x = numel(channels, shape), h = numel(co, shape);
      peak = std::max({peak, x + x + padded(channels, shape, same) + h, x + h + padded(co, shape, same) + h,
                       x + h + h});
      channels = co;
    }
    if (has_downsampler(c, i)) {
      const Conv3dGeometry g =
          downsampler_geometry(mode, c.temporal_downsample_factors[i], c.spatial_downsample_factors[i]);
      const std::array<int64_t, 3> next = conv_shape(shape, kKernel, g);
      peak = std::max(peak, numel(channels, shape) + padded(channels, shape, g) + numel(channels, next));
      shape = next;
    }
  }
  const uint64_t moments = numel(2 * c.latent_channels, shape);
  // norm_out in place, conv_out (its input, padded copy, output), quant_conv (its input and output).
  peak = std::max(peak, numel(channels, shape) + padded(channels, shape, same) + moments);
  peak = std::max(peak, 2 * moments);
  return (pixels + peak) * sizeof(float);
}

}  // namespace h3

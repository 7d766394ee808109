#include "models/video_vae/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>

#include "io/manifest.h"
#include "models/video_vae/stitch.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace h3 {

namespace {

// The rotary embedding covers three axes (t, y, x), each with rotary_dim / 6 frequencies, the 3·n angles repeated
// twice over the rotary dims (rotate-half pairing).
constexpr int64_t kRopeAxes = 3;

Tensor as_f32(const Tensor& t) { return t.dtype() == DType::F32 ? t : t.to(DType::F32); }

// Stacks tensors along dim 0 (same trailing shape) into a new f32 host tensor.
Tensor concat_rows_f32(const std::vector<Tensor>& parts) {
  Shape shape = parts.at(0).shape();
  shape[0] = 0;
  for (const Tensor& p : parts) shape[0] += p.dim(0);
  Tensor out = Tensor::empty(shape, DType::F32);
  char* dst = static_cast<char*>(out.data());
  for (const Tensor& p : parts) {
    Tensor f = as_f32(p);
    std::memcpy(dst, f.data(), f.nbytes());
    dst += f.nbytes();
  }
  return out;
}

// Frames [begin, end) of a [C, F, H, W] host tensor, as a new tensor.
Tensor copy_frames(const Tensor& t, int64_t begin, int64_t end) {
  const int64_t C = t.dim(0), F = t.dim(1), plane = t.dim(2) * t.dim(3);
  H3_CHECK(0 <= begin && begin <= end && end <= F, "copy_frames: [", begin, ", ", end, ") of ", t.str());
  Tensor out = Tensor::empty({C, end - begin, t.dim(2), t.dim(3)}, t.dtype());
  const size_t es = dtype_size(t.dtype());
  for (int64_t c = 0; c < C; ++c)
    std::memcpy(static_cast<char*>(out.data()) + c * (end - begin) * plane * es,
                static_cast<const char*>(t.data()) + (c * F + begin) * plane * es, (end - begin) * plane * es);
  return out;
}

// The first n frames of ImageNet-normalized decoder output as pixels: clamp(y·std + mean, 0, 1) (decoders.py).
Tensor to_pixels(const Tensor& decoded, int64_t n) {
  const int64_t C = decoded.dim(0), F = decoded.dim(1), plane = decoded.dim(2) * decoded.dim(3);
  H3_CHECK(C == 3, "video VAE: pixel conversion needs 3 channels, got ", C);
  Tensor out = Tensor::empty({C, n, decoded.dim(2), decoded.dim(3)}, DType::F32);
  const float* src = decoded.ptr<float>();
  float* dst = out.ptr<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < n * plane; ++i) {
      const float v = src[c * F * plane + i] * kImageNetStd[c] + kImageNetMean[c];
      dst[c * n * plane + i] = std::clamp(v, 0.f, 1.f);
    }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Loading

VideoVaeDecoder::VideoVaeDecoder(Backend& backend, const VideoVaeConfig& config)
    : backend_(backend), config_(config), geometry_(video_vae_geometry(config)) {
  dim_ = config.decoder_dim();
  heads_ = config.decoder_num_attention_heads;
  head_dim_ = config.decoder_attention_head_dim;
  ffn_dim_ = dim_ * config.decoder_ffn_mult;
  registers_ = config.decoder_num_register_tokens;
  rotary_dim_ = static_cast<int64_t>(static_cast<double>(head_dim_) * config.decoder_rope_dim_ratio);
  patch_features_ = config.out_channels * geometry_.temporal_ratio * geometry_.spatial_ratio * geometry_.spatial_ratio;
  H3_CHECK(rotary_dim_ > 0 && rotary_dim_ <= head_dim_ && rotary_dim_ % (2 * kRopeAxes) == 0,
           "video VAE: the decoder's rotary dims int(decoder_attention_head_dim · decoder_rope_dim_ratio) = ",
           rotary_dim_, " must be a positive multiple of ", 2 * kRopeAxes, " and at most ", head_dim_);
  H3_CHECK(config.out_channels == 3, "video VAE: out_channels must be 3 (RGB), got ", config.out_channels);
}

std::unique_ptr<VideoVaeDecoder> VideoVaeDecoder::load(Backend& backend, const Component& vae) {
  H3_CHECK(vae.present, "video VAE: component '", vae.name, "' is missing");
  const VideoVaeConfig config = load_video_vae_config(vae);
  const Checkpoint ckpt = Checkpoint::open(vae.weights);
  const VideoVaeTensorSource source = vae.layout == Layout::Original ? original_video_vae_source(ckpt, config)
                                                                     : diffusers_video_vae_source(ckpt);
  return create(backend, config, source);
}

std::unique_ptr<VideoVaeDecoder> VideoVaeDecoder::create(Backend& backend, const VideoVaeConfig& config,
                                                         const VideoVaeTensorSource& tensors) {
  std::unique_ptr<VideoVaeDecoder> d(new VideoVaeDecoder(backend, config));
  std::map<std::string, Shape> expected;
  for (const TensorSpec& s : video_vae_manifest(config, Layout::Diffusers, /*with_encoder=*/false))
    expected[s.name] = s.shape;
  // A tensor by diffusers name, shape-checked, as f32 host data.
  auto host = [&](const std::string& name) {
    Tensor t = tensors(name);
    const Shape& want = expected.at(name);
    H3_CHECK(dtype_is_float(t.dtype()), "video VAE: tensor '", name, "' is ", t.str(), ", expected a float tensor");
    H3_CHECK(t.shape() == want, "video VAE: tensor '", name, "' has shape ", shape_str(t.shape()), ", expected ",
             shape_str(want));
    return as_f32(t);
  };
  Backend& be = backend;
  const DType act = be.activation_dtype();
  // GEMM weights live in the activation dtype; biases, norms, scales and register tokens in f32.
  auto gemm = [&](const Tensor& t) { return be.upload(t, act); };
  auto vec = [&](const Tensor& t) { return be.upload(t, DType::F32); };
  const int64_t Z = config.latent_channels, D = d->dim_;

  d->post_quant_w_ = gemm(host("post_quant_conv.weight").reshape({Z, Z}));
  d->post_quant_b_ = vec(host("post_quant_conv.bias"));
  d->proj_in_w_ = gemm(host("decoder.proj_in.weight"));
  d->proj_in_b_ = vec(host("decoder.proj_in.bias"));
  d->register_tokens_ = vec(host("decoder.register_tokens").reshape({d->registers_, D}));
  for (int64_t k = 0; k < config.decoder_num_layers; ++k) {
    const std::string p = cat("decoder.transformer_blocks.", k, ".");
    Block b;
    b.norm1 = vec(host(p + "norm1.weight"));
    b.norm2 = vec(host(p + "norm2.weight"));
    b.qkv_w = gemm(concat_rows_f32(
        {host(p + "attn.to_q.weight"), host(p + "attn.to_k.weight"), host(p + "attn.to_v.weight")}));
    b.qkv_b = vec(concat_rows_f32({host(p + "attn.to_q.bias"), host(p + "attn.to_k.bias"), host(p + "attn.to_v.bias")}));
    b.out_w = gemm(host(p + "attn.to_out.0.weight"));
    b.out_b = vec(host(p + "attn.to_out.0.bias"));
    b.scale1 = vec(host(p + "scale1"));
    b.scale2 = vec(host(p + "scale2"));
    b.ff_in_w = gemm(host(p + "ff.net.0.proj.weight"));
    b.ff_in_b = vec(host(p + "ff.net.0.proj.bias"));
    b.ff_out_w = gemm(host(p + "ff.net.2.weight"));
    b.ff_out_b = vec(host(p + "ff.net.2.bias"));
    d->blocks_.push_back(std::move(b));
  }
  d->norm_out_w_ = vec(host("decoder.norm_out.weight"));
  d->norm_out_b_ = vec(host("decoder.norm_out.bias"));
  d->proj_out_w_ = gemm(host("decoder.proj_out.weight"));
  d->proj_out_b_ = vec(host("decoder.proj_out.bias"));
  return d;
}

// ---------------------------------------------------------------------------------------------------------------
// Geometry and validation

int64_t VideoVaeDecoder::frames_for_latents(int64_t latent_frames) const {
  return plan_temporal_chunks(geometry_, latent_frames).total_frames;
}

void validate_video_vae_decode(const VideoVaeConfig& config, const Tensor& latents, const TileOptions& o) {
  const int64_t s = config.spatial_ratio();
  H3_CHECK(latents.device() == Device::CPU && latents.ndim() == 4 && dtype_is_float(latents.dtype()),
           "video VAE decode: latents must be a host float tensor [channels, frames, height, width], got ",
           latents.str());
  H3_CHECK(latents.dim(0) == config.latent_channels, "video VAE decode: latents have ", latents.dim(0),
           " channels, the VAE expects latent_channels = ", config.latent_channels);
  H3_CHECK(latents.dim(1) >= 1 && latents.dim(2) >= 1 && latents.dim(3) >= 1,
           "video VAE decode: latent frames, height and width must each be >= 1, got ", shape_str(latents.shape()));
  H3_CHECK(o.tile >= s && o.tile % s == 0, "video VAE decode: the tile size must be a positive multiple of the ",
           "spatial compression ratio (", s, " px), got ", o.tile, " px");
  // A multiple of the ratio keeps every tile start on the latent grid and the stitched canvas exactly s·h × s·w.
  H3_CHECK(o.tile_overlap >= 0 && o.tile_overlap < o.tile && o.tile_overlap % s == 0,
           "video VAE decode: the tile overlap must be a multiple of ", s, " px in [0, tile = ", o.tile, "), got ",
           o.tile_overlap, " px");
  H3_CHECK(o.max_batch_tokens >= 1, "video VAE decode: max_batch_tokens must be >= 1, got ", o.max_batch_tokens);
}

// ---------------------------------------------------------------------------------------------------------------
// The ViT

std::pair<Tensor, Tensor> VideoVaeDecoder::rope_tables(int64_t t, int64_t h, int64_t w) const {
  const int64_t nf = rotary_dim_ / (2 * kRopeAxes), rot = rotary_dim_, n_patch = t * h * w;
  const int64_t n = n_patch + registers_ + 1;
  // inv_freq = 1 / θ^arange(0, 1, 6/rot) in float32, the arange values formed in double as torch does.
  const double step = static_cast<double>(2 * kRopeAxes) / static_cast<double>(rot);
  std::vector<float> inv_freq(nf);
  for (int64_t k = 0; k < nf; ++k)
    inv_freq[k] = 1.f / std::pow(static_cast<float>(config_.decoder_rope_theta), static_cast<float>(k * step));
  // Positions normalized to the tile: 2·((i + 0.5) / S) − 1, float32.
  auto positions = [](int64_t size) {
    std::vector<float> p(size);
    for (int64_t i = 0; i < size; ++i)
      p[i] = 2.f * ((static_cast<float>(i) + 0.5f) / static_cast<float>(size)) - 1.f;
    return p;
  };
  const std::vector<float> pt = positions(t), py = positions(h), px = positions(w);
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  Tensor cos_t = Tensor::empty({n, rot}, DType::F32), sin_t = Tensor::empty({n, rot}, DType::F32);
  float* C = cos_t.ptr<float>();
  float* S = sin_t.ptr<float>();
  for (int64_t r = 0; r < n; ++r) {
    float pos[kRopeAxes] = {0.f, 0.f, 0.f};  // register and zero tokens sit at the origin
    if (r < n_patch) {
      pos[0] = pt[r / (h * w)];
      pos[1] = py[(r / w) % h];
      pos[2] = px[r % w];
    }
    for (int64_t a = 0; a < kRopeAxes; ++a)
      for (int64_t k = 0; k < nf; ++k) {
        const float angle = two_pi * pos[a] * inv_freq[k];
        for (int64_t rep = 0; rep < 2; ++rep) {
          const int64_t col = rep * (rot / 2) + a * nf + k;
          C[r * rot + col] = std::cos(angle);
          S[r * rot + col] = std::sin(angle);
        }
      }
  }
  return {cos_t, sin_t};
}

std::vector<Tensor> VideoVaeDecoder::forward_tiles(const std::vector<Tensor>& tiles) {
  Backend& be = backend_;
  const DType act = be.activation_dtype();
  const int64_t B = static_cast<int64_t>(tiles.size()), Z = config_.latent_channels, D = dim_;
  const int64_t t = tiles[0].dim(1), h = tiles[0].dim(2), w = tiles[0].dim(3);
  const int64_t n_patch = t * h * w, n = n_patch + registers_ + 1, rows = B * n;

  // Patch tokens of every tile, frame-major then row then column, channels last.
  Tensor tokens = Tensor::empty({B * n_patch, Z}, DType::F32);
  for (int64_t b = 0; b < B; ++b) {
    const Tensor& tile = tiles[b];
    H3_CHECK(tile.dtype() == DType::F32 && tile.ndim() == 4 && tile.dim(0) == Z && tile.dim(1) == t &&
                 tile.dim(2) == h && tile.dim(3) == w,
             "video VAE: tiles of one batch must be F32[", Z, ", ", t, ", ", h, ", ", w, "], got ", tile.str());
    const float* src = tile.ptr<float>();
    float* dst = tokens.ptr<float>() + b * n_patch * Z;
    for (int64_t i = 0; i < n_patch; ++i)
      for (int64_t c = 0; c < Z; ++c) dst[i * Z + c] = src[c * n_patch + i];
  }
  // Row tables: where each tile's patch tokens and register tokens sit in the packed sequence.
  Tensor patch_rows = Tensor::empty({B * n_patch}, DType::I32);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n_patch; ++i) patch_rows.ptr<int32_t>()[b * n_patch + i] = static_cast<int32_t>(b * n + i);
  const Tensor patch_idx = be.upload(patch_rows, DType::I32);

  // post_quant_conv (pointwise) and proj_in, then the residual stream [patches | registers | zero] per tile, f32.
  Tensor in = be.upload(tokens, act);
  Tensor quant = be.empty({B * n_patch, Z}, act);
  be.linear(in, post_quant_w_, &post_quant_b_, quant);
  Tensor embedded = be.empty({B * n_patch, D}, act);
  be.linear(quant, proj_in_w_, &proj_in_b_, embedded);
  Tensor x = be.zeros({rows, D}, DType::F32);
  be.scatter_rows(embedded, patch_idx, x);
  if (registers_ > 0) {  // the register tokens repeated per tile, then placed after each tile's patches
    Tensor which = Tensor::empty({B * registers_}, DType::I32), where = Tensor::empty({B * registers_}, DType::I32);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < registers_; ++r) {
        which.ptr<int32_t>()[b * registers_ + r] = static_cast<int32_t>(r);
        where.ptr<int32_t>()[b * registers_ + r] = static_cast<int32_t>(b * n + n_patch + r);
      }
    Tensor repeated = be.empty({B * registers_, D}, DType::F32);
    be.gather_rows(register_tokens_, be.upload(which, DType::I32), repeated);
    be.scatter_rows(repeated, be.upload(where, DType::I32), x);
  }

  // Rotary tables: every tile of a batch has the same geometry, so one table repeated per tile.
  auto [cos1, sin1] = rope_tables(t, h, w);
  Tensor cos_all = Tensor::empty({rows, rotary_dim_}, DType::F32), sin_all = Tensor::empty({rows, rotary_dim_}, DType::F32);
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(cos_all.ptr<float>() + b * cos1.numel(), cos1.ptr<float>(), cos1.nbytes());
    std::memcpy(sin_all.ptr<float>() + b * sin1.numel(), sin1.ptr<float>(), sin1.nbytes());
  }
  const Tensor cos_d = be.upload(cos_all, DType::F32), sin_d = be.upload(sin_all, DType::F32);

  AttentionSpec spec;
  spec.heads_q = spec.heads_kv = static_cast<int>(heads_);
  spec.head_dim = static_cast<int>(head_dim_);
  spec.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  spec.qk_norm = true;  // per-head RMSNorm without weight
  spec.qk_norm_eps = static_cast<float>(config_.decoder_norm_eps);
  spec.rotary_dim = static_cast<int>(rotary_dim_);
  spec.cos = &cos_d;
  spec.sin = &sin_d;
  for (int64_t b = 0; b <= B; ++b) spec.segments.push_back(b * n);  // tiles never attend to each other

  const float eps = static_cast<float>(config_.decoder_norm_eps);
  Tensor normed = be.empty({rows, D}, act), qkv = be.empty({rows, 3 * D}, act), attn = be.empty({rows, D}, act);
  Tensor branch = be.empty({rows, D}, act), gate_value = be.empty({rows, 2 * ffn_dim_}, act);
  Tensor hidden = be.empty({rows, ffn_dim_}, act);
  for (const Block& blk : blocks_) {
    be.rms_norm(x, &blk.norm1, eps, normed);
    be.linear(normed, blk.qkv_w, &blk.qkv_b, qkv);
    be.self_attention(qkv, spec, attn);
    be.linear(attn, blk.out_w, &blk.out_b, branch);
    be.residual_add(x, branch, &blk.scale1);
    be.rms_norm(x, &blk.norm2, eps, normed);
    be.linear(normed, blk.ff_in_w, &blk.ff_in_b, gate_value);
    be.swiglu(gate_value, /*value_first=*/true, hidden);
    be.linear(hidden, blk.ff_out_w, &blk.ff_out_b, branch);
    be.residual_add(x, branch, &blk.scale2);
  }
  be.layer_norm(x, &norm_out_w_, &norm_out_b_, eps, normed);
  Tensor patches = be.empty({B * n_patch, D}, act);
  be.gather_rows(normed, patch_idx, patches);  // drop the register and zero tokens
  Tensor features = be.empty({B * n_patch, patch_features_}, act);
  be.linear(patches, proj_out_w_, &proj_out_b_, features);
  const Tensor out = as_f32(be.download(features));

  // Unpatchify: the features of token (tt, yy, xx) are ordered (c, it, iy, ix); pixel [c, r·tt+it, s·yy+iy, s·xx+ix].
  const int64_t r = geometry_.temporal_ratio, s = geometry_.spatial_ratio, C = config_.out_channels;
  const int64_t T = r * t, H = s * h, W = s * w;
  std::vector<Tensor> result;
  for (int64_t b = 0; b < B; ++b) {
    Tensor pix = Tensor::empty({C, T, H, W}, DType::F32);
    float* dst = pix.ptr<float>();
    const float* src = out.ptr<float>() + b * n_patch * patch_features_;
    parallel_for(0, n_patch, 16, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t tt = i / (h * w), yy = (i / w) % h, xx = i % w;
        const float* f = src + i * patch_features_;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t it = 0; it < r; ++it)
            for (int64_t iy = 0; iy < s; ++iy) {
              float* row = dst + ((c * T + r * tt + it) * H + s * yy + iy) * W + s * xx;
              std::memcpy(row, f + ((c * r + it) * s + iy) * s, s * sizeof(float));
            }
      }
    });
    result.push_back(std::move(pix));
  }
  return result;
}

Tensor VideoVaeDecoder::decode_tile(const Tensor& raw_latents) {
  H3_CHECK(raw_latents.ndim() == 4 && raw_latents.dim(0) == config_.latent_channels,
           "video VAE: decode_tile takes [", config_.latent_channels, ", t, h, w] latents, got ", raw_latents.str());
  return forward_tiles({as_f32(raw_latents)}).at(0);
}

// ---------------------------------------------------------------------------------------------------------------
// Tiles and chunks

Tensor VideoVaeDecoder::decode_window(const Tensor& window, const TileSplit& ys, const TileSplit& xs,
                                      const TileOptions& options) {
  const int64_t s = geometry_.spatial_ratio, C = window.dim(0), T = window.dim(1), h = window.dim(2),
                w = window.dim(3);
  const int64_t th = ys.length / s, tw = xs.length / s;
  // Latents of tile (i, j): rows [start_i / s, start_i / s + th), cols likewise.
  auto tile_latents = [&](int64_t i, int64_t j) {
    const int64_t y0 = ys.starts[i] / s, x0 = xs.starts[j] / s;
    Tensor tile = Tensor::empty({C, T, th, tw}, DType::F32);
    const float* src = window.ptr<float>();
    float* dst = tile.ptr<float>();
    for (int64_t ct = 0; ct < C * T; ++ct)
      for (int64_t y = 0; y < th; ++y)
        std::memcpy(dst + (ct * th + y) * tw, src + (ct * h + y0 + y) * w + x0, tw * sizeof(float));
    return tile;
  };
  const int64_t ny = static_cast<int64_t>(ys.starts.size()), nx = static_cast<int64_t>(xs.starts.size());
  const int64_t tokens_per_tile = T * th * tw + registers_ + 1;
  const int64_t per_batch = std::max<int64_t>(1, options.max_batch_tokens / tokens_per_tile);
  std::vector<Tensor> decoded;
  for (int64_t first = 0; first < ny * nx; first += per_batch) {
    std::vector<Tensor> batch;
    for (int64_t k = first; k < std::min(ny * nx, first + per_batch); ++k) batch.push_back(tile_latents(k / nx, k % nx));
    for (Tensor& d : forward_tiles(batch)) decoded.push_back(std::move(d));
  }
  return stitch_tiles(decoded, ys, xs);
}

Tensor VideoVaeDecoder::decode(const Tensor& latents, const TileOptions& options) {
  validate(latents, options);
  const int64_t s = geometry_.spatial_ratio, H = latents.dim(2) * s, W = latents.dim(3) * s;
  const int64_t frames = frames_for_latents(latents.dim(1));
  Tensor video = Tensor::empty({config_.out_channels, frames, H, W}, DType::F32);
  const int64_t plane = H * W;
  decode_streaming(latents, options, [&](const Tensor& piece, int64_t first) {
    const int64_t n = piece.dim(1);
    for (int64_t c = 0; c < piece.dim(0); ++c)
      std::memcpy(video.ptr<float>() + (c * frames + first) * plane, piece.ptr<float>() + c * n * plane,
                  n * plane * sizeof(float));
  });
  return video;
}

void VideoVaeDecoder::decode_streaming(const Tensor& latents, const TileOptions& options, const FrameSink& sink) {
  validate(latents, options);
  const VideoVaeGeometry& g = geometry_;
  const int64_t C = latents.dim(0), T = latents.dim(1), h = latents.dim(2), w = latents.dim(3);
  const TemporalPlan plan = plan_temporal_chunks(g, T);
  const TileSplit ys = split_tiles(h * g.spatial_ratio, options.tile, options.tile_overlap, g.spatial_ratio);
  const TileSplit xs = split_tiles(w * g.spatial_ratio, options.tile, options.tile_overlap, g.spatial_ratio);

  // De-normalize (z = latent·std + mean, float32 per channel) and repeat the last frame P times.
  const int64_t Tp = T + plan.pad_latents, plane = h * w;
  Tensor z = Tensor::empty({C, Tp, h, w}, DType::F32);
  const Tensor src = as_f32(latents);
  for (int64_t c = 0; c < C; ++c) {
    const float std_c = static_cast<float>(config_.latents_std[c]), mean_c = static_cast<float>(config_.latents_mean[c]);
    for (int64_t f = 0; f < Tp; ++f) {
      const float* in = src.ptr<float>() + (c * T + std::min(f, T - 1)) * plane;
      float* out = z.ptr<float>() + (c * Tp + f) * plane;
      for (int64_t i = 0; i < plane; ++i) out[i] = in[i] * std_c + mean_c;
    }
  }

  int64_t emitted = 0;
  auto emit = [&](const Tensor& decoded) {
    const int64_t n = std::min(decoded.dim(1), plan.total_frames - emitted);
    if (n <= 0) return;
    sink(to_pixels(decoded, n), emitted);
    emitted += n;
  };
  log_debug("video VAE decode: ", T, " latent frames (+", plan.pad_latents, " padding) in ", plan.num_chunks,
            " chunks of ", ys.starts.size(), "x", xs.starts.size(), " tiles -> ", plan.total_frames, " frames");
  Tensor tail;
  for (int64_t c = 0; c < plan.num_chunks; ++c) {
    const int64_t first = c * g.tokens_chunk_size;
    const Tensor window = copy_frames(z, first, first + g.window_latents());
    const Tensor decoded = decode_window(window, ys, xs, options);
    Tensor main = copy_frames(decoded, g.frame_pre_padding, g.chunk_frames());
    if (tail.defined()) cross_fade_frames(tail, main, g.frame_overlap);
    if (g.has_tail())
      tail = copy_frames(decoded, std::min(g.chunk_frames() + g.frame_pre_padding, decoded.dim(1)), decoded.dim(1));
    emit(main);
  }
  if (tail.defined()) emit(tail);
  H3_CHECK(emitted == plan.total_frames, "video VAE: decoded ", emitted, " frames, planned ", plan.total_frames);
}

}  // namespace h3

#include "models/video_vae/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <numbers>

#include "io/manifest.h"
#include "models/random_weights.h"
#include "util/cancel.h"
#include "util/env.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace h3 {

namespace {

// The rotary embedding covers three axes (t, y, x), each with rotary_dim / 6 frequencies, the 3·n angles repeated
// twice over the rotary dims (rotate-half pairing).
constexpr int64_t kRopeAxes = 3;
// Rows of the FFN computed at once: bounds its [rows, 2·ffn] and [rows, ffn] buffers (memory only, never the result).
constexpr int64_t kFfnRowChunk = 16384;
// Tokens per batch of tiles on a GPU: a whole released-size window (28 tiles × 1,797 tokens at 1344×768).
constexpr int64_t kGpuBatchTokens = 65536;
// On the CPU: two tiles of the demo's 256×256 canvas (1,795 tokens each). A cancel (util/cancel.h) waits for one
// transformer block of a batch, whose attention dominates: at 16,384 tokens (every window of the demo in one batch)
// that was 2 CPU seconds, at 4,096 a quarter of it.
constexpr int64_t kCpuBatchTokens = 4096;
// Random weights: the spread of the layer scales (zero at the reference's init, which would make every block an
// identity) and of the register tokens.
constexpr float kRandomLayerScaleStd = 0.1f;
constexpr float kRandomRegisterStd = 1.f;

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

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

Tensor host_i32(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
  std::copy(v.begin(), v.end(), t.ptr<int32_t>());
  return t;
}

// Latent frames [f0, f0 + T) of a [C, F, h, w] f32 host tensor, channels last, into dst [T·h·w, C].
void copy_channels_last(const Tensor& z, int64_t f0, int64_t T, float* dst) {
  const int64_t C = z.dim(0), F = z.dim(1), plane = z.dim(2) * z.dim(3);
  const float* src = z.ptr<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < T * plane; ++i) dst[i * C + c] = src[(c * F + f0) * plane + i];
}

// Windows [first, first + count) of a [C, F, h, w] f32 host tensor (window k: latent frames [k·stride,
// k·stride + T)), channels last, one window after another: [count·T·h·w, C].
Tensor windows_channels_last(const Tensor& z, int64_t first, int64_t count, int64_t stride, int64_t T) {
  const int64_t C = z.dim(0), window_rows = T * z.dim(2) * z.dim(3);
  Tensor out = Tensor::empty({count * window_rows, C}, DType::F32);
  for (int64_t k = 0; k < count; ++k)
    copy_channels_last(z, (first + k) * stride, T, out.ptr<float>() + k * window_rows * C);
  return out;
}

// The tile grid of one decode window of latent_h × latent_w latents (spec §9.2).
VideoTileGrid window_tile_grid(const VideoVaeGeometry& g, int64_t channels, int64_t latent_h, int64_t latent_w,
                               const TileOptions& o) {
  const int64_t s = g.spatial_ratio;
  const TileSplit ys = split_tiles(latent_h * s, o.tile, o.tile_overlap, s);
  const TileSplit xs = split_tiles(latent_w * s, o.tile, o.tile_overlap, s);
  VideoTileGrid grid;
  grid.channels = channels;
  grid.temporal_patch = g.temporal_ratio;
  grid.spatial_patch = s;
  grid.latent_frames = g.window_latents();
  grid.tile_latent_h = ys.length / s;
  grid.tile_latent_w = xs.length / s;
  grid.y_starts = ys.starts;
  grid.x_starts = xs.starts;
  grid.y_overlaps = ys.overlaps;
  grid.x_overlaps = xs.overlaps;
  return grid;
}

// The row of every tile token of `windows` consecutive windows uploaded one after another (window k's latents at
// rows [k·T·h·w, (k+1)·T·h·w) of a channels-last upload): window-major, then tile-major (row-major grid), then
// tokens frame/row/column-major. The rows of the first n windows are the first n·tiles·tile_tokens entries.
std::vector<int32_t> group_tile_rows(const VideoTileGrid& grid, int64_t latent_h, int64_t latent_w, int64_t windows) {
  const int64_t s = grid.spatial_patch, wt = grid.latent_frames, th = grid.tile_latent_h, tw = grid.tile_latent_w;
  const int64_t window_rows = wt * latent_h * latent_w;
  std::vector<int32_t> rows;
  rows.reserve(windows * grid.tiles() * grid.tile_tokens());
  for (int64_t k = 0; k < windows; ++k)
    for (int64_t y0 : grid.y_starts)
      for (int64_t x0 : grid.x_starts)
        for (int64_t tt = 0; tt < wt; ++tt)
          for (int64_t yy = 0; yy < th; ++yy)
            for (int64_t xx = 0; xx < tw; ++xx)
              rows.push_back(
                  static_cast<int32_t>(k * window_rows + (tt * latent_h + y0 / s + yy) * latent_w + x0 / s + xx));
  return rows;
}

// Turns decoded windows into pixel chunks, in window order (spec §9.3): the window's main frames are stitched,
// cross-faded with the previous window's tail and converted to pixels; the tail is stitched and kept for the next
// window (or emitted last). Each chunk's download starts at once; hand_over() waits for the downloads and gives the
// chunks to the sink, so a caller can queue more device work first and let the host work overlap it.
class ChunkStream {
 public:
  using Sink = VideoVaeDecoder::FrameSink;
  ChunkStream(Backend& be, const VideoTileGrid& grid, const VideoVaeGeometry& g, int64_t total_frames,
              const std::vector<float>& mean, const std::vector<float>& std, const Sink& sink)
      : be_(be), grid_(grid), fade_extent_(g.frame_overlap), total_frames_(total_frames), mean_(mean), std_(std),
        sink_(sink) {
    main_begin_ = g.frame_pre_padding;
    main_end_ = std::min(g.chunk_frames(), grid.frames());
    tail_begin_ = std::min(g.chunk_frames() + g.frame_pre_padding, grid.frames());
    keeps_tail_ = g.has_tail() && tail_begin_ < grid.frames();
  }

  // features: one window's decoded tiles [tiles·tile_tokens, P] (device).
  void add_window(const Tensor& features) {
    Tensor main = stitched(features, main_begin_, main_end_);
    Tensor next_tail;
    if (keeps_tail_) next_tail = stitched(features, tail_begin_, grid_.frames());
    emit(main, tail_.defined() ? &tail_ : nullptr);
    tail_ = next_tail;
  }

  void hand_over() {
    while (!pending_.empty()) {
      const Tensor px = pending_.front().first->wait();
      const int64_t first = pending_.front().second;
      pending_.pop_front();
      sink_(px, first);
    }
  }

  // Emits the last window's tail and hands everything over.
  void finish() {
    if (tail_.defined()) emit(tail_, nullptr);
    tail_ = Tensor();
    hand_over();
    H3_CHECK(emitted_ == total_frames_, "video VAE: decoded ", emitted_, " frames, planned ", total_frames_);
  }

 private:
  Tensor stitched(const Tensor& features, int64_t begin, int64_t end) {
    Tensor canvas = be_.empty({grid_.channels, end - begin, grid_.height(), grid_.width()}, DType::F32);
    be_.stitch_video_tiles(features, grid_, begin, end, canvas);
    return canvas;
  }

  // Frames past the planned total (produced by the padding latents) are dropped.
  void emit(const Tensor& frames, const Tensor* fade_from) {
    const int64_t n = std::min(frames.dim(1), total_frames_ - emitted_);
    if (n <= 0) return;
    Tensor px = be_.empty({grid_.channels, n, grid_.height(), grid_.width()}, DType::F32);
    be_.video_frames_to_pixels(frames, fade_from, fade_extent_, mean_, std_, px);
    pending_.emplace_back(be_.download_async(px), emitted_);
    emitted_ += n;
  }

  Backend& be_;
  const VideoTileGrid& grid_;
  int64_t fade_extent_, total_frames_;
  const std::vector<float>& mean_;
  const std::vector<float>& std_;
  const Sink& sink_;
  int64_t main_begin_ = 0, main_end_ = 0, tail_begin_ = 0;
  bool keeps_tail_ = false;
  Tensor tail_;  // the previous window's tail frames (device)
  int64_t emitted_ = 0;
  std::deque<std::pair<std::unique_ptr<PendingDownload>, int64_t>> pending_;  // downloads and their first frame
};

}  // namespace

int64_t default_video_vae_batch_tokens(const Backend& backend) {
  return backend.device() == Device::CUDA ? kGpuBatchTokens : kCpuBatchTokens;
}

VideoVaeBatchPlan plan_video_vae_batches(const VideoVaeConfig& config, int64_t latent_frames, int64_t latent_h,
                                         int64_t latent_w, const TileOptions& options) {
  const VideoVaeGeometry g = video_vae_geometry(config);
  const VideoTileGrid grid = window_tile_grid(g, config.out_channels, latent_h, latent_w, options);
  VideoVaeBatchPlan p;
  p.windows = plan_temporal_chunks(g, latent_frames).num_chunks;
  p.tiles_per_window = grid.tiles();
  p.tile_sequence = grid.tile_tokens() + config.decoder_num_register_tokens + 1;
  const int64_t batch_tiles = std::max<int64_t>(options.max_batch_tokens / p.tile_sequence, 1);
  p.windows_per_group = std::clamp<int64_t>(batch_tiles / p.tiles_per_window, 1, p.windows);
  p.tiles_per_batch = std::min(batch_tiles, p.windows_per_group * p.tiles_per_window);
  return p;
}

DType video_vae_gemm_dtype(const Backend& backend) {
  if (backend.activation_dtype() == DType::F32) return DType::F32;
  return env_flag("H3_VIDEO_VAE_BF16") ? DType::BF16 : DType::F16;
}

// ---------------------------------------------------------------------------------------------------------------
// Construction

VideoVaeDecoder::VideoVaeDecoder(Backend& backend, const VideoVaeConfig& config)
    : backend_(backend), config_(config), geometry_(video_vae_geometry(config)), gemm_dt_(video_vae_gemm_dtype(backend)) {
  dim_ = config.decoder_dim();
  heads_ = config.decoder_num_attention_heads;
  head_dim_ = config.decoder_attention_head_dim;
  ffn_dim_ = dim_ * config.decoder_ffn_mult;
  registers_ = config.decoder_num_register_tokens;
  rotary_dim_ = static_cast<int64_t>(static_cast<double>(head_dim_) * config.decoder_rope_dim_ratio);
  patch_features_ = config.out_channels * geometry_.temporal_ratio * geometry_.spatial_ratio * geometry_.spatial_ratio;
  config.validate("video VAE decoder config");  // among its rules, the rotary dims and RGB output
  pixel_mean_.assign(kImageNetMean.begin(), kImageNetMean.end());
  pixel_std_.assign(kImageNetStd.begin(), kImageNetStd.end());
}

std::unique_ptr<VideoVaeDecoder> VideoVaeDecoder::load(Backend& backend, const Component& vae) {
  H3_CHECK(vae.present, "video VAE: component '", vae.name, "' is missing");
  const VideoVaeConfig config = load_video_vae_config(vae);
  return create(backend, config, video_vae_source(vae, config));
}

std::unique_ptr<VideoVaeDecoder> VideoVaeDecoder::create(Backend& backend, const VideoVaeConfig& config,
                                                         const VideoVaeTensorSource& tensors) {
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
  return build(backend, config, [&](const std::vector<std::string>& names, const Shape& shape, DType dt) {
    std::vector<Tensor> parts;
    for (const std::string& n : names) parts.push_back(host(n));
    const Tensor t = parts.size() == 1 ? parts[0] : concat_rows_f32(parts);
    return backend.upload(t.reshape(shape), dt);
  });
}

std::unique_ptr<VideoVaeDecoder> VideoVaeDecoder::random(Backend& backend, VideoVaeConfig config, uint64_t seed) {
  if (config.latents_mean.empty()) config.latents_mean.assign(config.latent_channels, 0.0);
  if (config.latents_std.empty()) config.latents_std.assign(config.latent_channels, 1.0);
  config.validate("random video VAE config");
  RandomWeights rw(backend, seed);
  return build(backend, config, [&](const std::vector<std::string>& names, const Shape& shape, DType dt) {
    const std::string& n = names.front();
    if (ends_with(n, "norm1.weight") || ends_with(n, "norm2.weight") || ends_with(n, "norm_out.weight"))
      return rw.norm(n, shape, dt);
    if (ends_with(n, ".bias")) return rw.bias(n, shape, dt);
    if (ends_with(n, "scale1") || ends_with(n, "scale2")) return rw.normal(n, shape, dt, 0.f, kRandomLayerScaleStd);
    if (ends_with(n, "register_tokens")) return rw.normal(n, shape, dt, 0.f, kRandomRegisterStd);
    return rw.matrix(n, shape, dt);  // [out, in]: fan-in = in
  });
}

std::unique_ptr<VideoVaeDecoder> VideoVaeDecoder::build(Backend& backend, const VideoVaeConfig& config,
                                                        const WeightMaker& make) {
  std::unique_ptr<VideoVaeDecoder> d(new VideoVaeDecoder(backend, config));
  // GEMM weights and biases in the GEMM dtype; norms, scales and register tokens in f32.
  const DType g = d->gemm_dt_, f32 = DType::F32;
  const int64_t Z = config.latent_channels, D = d->dim_, F = d->ffn_dim_, P = d->patch_features_;
  auto one = [&](const std::string& name, const Shape& shape, DType dt) { return make({name}, shape, dt); };

  d->post_quant_w_ = one("post_quant_conv.weight", {Z, Z}, g);
  d->post_quant_b_ = one("post_quant_conv.bias", {Z}, g);
  d->proj_in_w_ = one("decoder.proj_in.weight", {D, Z}, g);
  d->proj_in_b_ = one("decoder.proj_in.bias", {D}, g);
  d->register_tokens_ = one("decoder.register_tokens", {d->registers_, D}, f32);
  for (int64_t k = 0; k < config.decoder_num_layers; ++k) {
    const std::string p = cat("decoder.transformer_blocks.", k, ".");
    Block b;
    b.norm1 = one(p + "norm1.weight", {D}, f32);
    b.norm2 = one(p + "norm2.weight", {D}, f32);
    b.qkv_w = make({p + "attn.to_q.weight", p + "attn.to_k.weight", p + "attn.to_v.weight"}, {3 * D, D}, g);
    b.qkv_b = make({p + "attn.to_q.bias", p + "attn.to_k.bias", p + "attn.to_v.bias"}, {3 * D}, g);
    b.out_w = one(p + "attn.to_out.0.weight", {D, D}, g);
    b.out_b = one(p + "attn.to_out.0.bias", {D}, g);
    b.scale1 = one(p + "scale1", {D}, f32);
    b.scale2 = one(p + "scale2", {D}, f32);
    b.ff_in_w = one(p + "ff.net.0.proj.weight", {2 * F, D}, g);
    b.ff_in_b = one(p + "ff.net.0.proj.bias", {2 * F}, g);
    b.ff_out_w = one(p + "ff.net.2.weight", {D, F}, g);
    b.ff_out_b = one(p + "ff.net.2.bias", {D}, g);
    d->blocks_.push_back(std::move(b));
  }
  d->norm_out_w_ = one("decoder.norm_out.weight", {D}, f32);
  d->norm_out_b_ = one("decoder.norm_out.bias", {D}, f32);
  d->proj_out_w_ = one("decoder.proj_out.weight", {P, D}, g);
  d->proj_out_b_ = one("decoder.proj_out.bias", {P}, g);
  return d;
}

uint64_t VideoVaeDecoder::weight_bytes(const VideoVaeConfig& c, DType gemm_dtype) {
  const VideoVaeGeometry g = video_vae_geometry(c);
  const uint64_t Z = c.latent_channels, D = c.decoder_dim(), F = D * c.decoder_ffn_mult, R = c.decoder_num_register_tokens;
  const uint64_t P = c.out_channels * g.temporal_ratio * g.spatial_ratio * g.spatial_ratio, L = c.decoder_num_layers;
  const uint64_t gemm = Z * Z + Z + D * Z + D + L * (3 * D * D + 3 * D + D * D + D + 2 * F * D + 2 * F + D * F + D) +
                        P * D + P;
  const uint64_t f32 = R * D + L * 4 * D + 2 * D;
  return gemm * dtype_size(gemm_dtype) + f32 * sizeof(float);
}

uint64_t VideoVaeDecoder::decode_workspace_bytes(const VideoVaeConfig& c, DType gemm_dtype, int64_t latent_frames,
                                                 int64_t latent_h, int64_t latent_w, const TileOptions& o) {
  const VideoVaeGeometry g = video_vae_geometry(c);
  const VideoVaeBatchPlan plan = plan_video_vae_batches(c, latent_frames, latent_h, latent_w, o);
  const uint64_t s = g.spatial_ratio, group = plan.windows_per_group, per_batch = plan.tiles_per_batch;
  const uint64_t n_patch = plan.tile_sequence - c.decoder_num_register_tokens - 1;
  const uint64_t rows = plan.rows_per_batch();
  const uint64_t D = c.decoder_dim(), F = D * c.decoder_ffn_mult, gs = dtype_size(gemm_dtype);
  const uint64_t rot = static_cast<uint64_t>(c.decoder_attention_head_dim * c.decoder_rope_dim_ratio);
  const uint64_t P = c.out_channels * g.temporal_ratio * s * s;
  const uint64_t ffn_rows = std::min<uint64_t>(rows, kFfnRowChunk);
  // One batch: the f32 residual stream, normed | qkv | attention | branch, the FFN chunk, patches; the rope tables
  // the decoder keeps for reuse (one set, for the largest batch of its tile shape seen so far: at most the batch
  // token budget, or one tile when a tile exceeds it — an earlier canvas's may be larger than this one's).
  const uint64_t cached_rows = std::max<uint64_t>(std::max<int64_t>(o.max_batch_tokens, plan.tile_sequence), rows);
  const uint64_t batch = rows * D * 4 + rows * 6 * D * gs + ffn_rows * 3 * F * gs + per_batch * n_patch * D * gs +
                         cached_rows * rot * 8;
  // A group: its windows' latent rows and tile row tables, and every tile's features (alive until stitched).
  const uint64_t window_rows = g.window_latents() * latent_h * latent_w;
  const uint64_t group_tiles = group * plan.tiles_per_window;
  const uint64_t features = group * window_rows * c.latent_channels * gs + group_tiles * n_patch * 4 +
                            group_tiles * n_patch * P * gs;
  // The canvases: main frames, the next tail and the previous one; the previous group's chunks of pixels, still
  // downloading while this group's batches run.
  const uint64_t H = latent_h * s, W = latent_w * s, plane = H * W * c.out_channels * 4;
  const uint64_t canvases = plane * (g.main_frames() + 2 * g.tail_frames()) + group * plane * g.main_frames();
  return batch + features + canvases;
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

VideoVaeDecoder::BatchTables VideoVaeDecoder::batch_tables(int64_t B, int64_t t, int64_t h, int64_t w) {
  const int64_t n_patch = t * h * w, n = n_patch + registers_ + 1;
  const std::array<int64_t, 3> shape{t, h, w};
  if (shape != tables_shape_ || B > tables_tiles_) {
    tables_ = BatchTables{};  // the old tables are freed in stream order, after any work already queued on them
    tables_ = make_batch_tables(B, t, h, w);
    tables_shape_ = shape;
    tables_tiles_ = B;
  }
  BatchTables view;
  view.patch_rows = tables_.patch_rows.slice(0, B * n_patch);
  if (registers_ > 0) {
    view.register_src = tables_.register_src.slice(0, B * registers_);
    view.register_rows = tables_.register_rows.slice(0, B * registers_);
  }
  view.cos = tables_.cos.slice(0, B * n);
  view.sin = tables_.sin.slice(0, B * n);
  view.segments.assign(tables_.segments.begin(), tables_.segments.begin() + B + 1);
  return view;
}

VideoVaeDecoder::BatchTables VideoVaeDecoder::make_batch_tables(int64_t B, int64_t t, int64_t h, int64_t w) const {
  Backend& be = backend_;
  const int64_t n_patch = t * h * w, n = n_patch + registers_ + 1;
  BatchTables tab;
  // Each tile's sequence: its patch tokens (frame-major, then row, then column), its register tokens, one zero token.
  std::vector<int32_t> patch_rows(B * n_patch), reg_src(B * registers_), reg_rows(B * registers_);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < n_patch; ++i) patch_rows[b * n_patch + i] = static_cast<int32_t>(b * n + i);
    for (int64_t r = 0; r < registers_; ++r) {
      reg_src[b * registers_ + r] = static_cast<int32_t>(r);
      reg_rows[b * registers_ + r] = static_cast<int32_t>(b * n + n_patch + r);
    }
  }
  tab.patch_rows = be.upload(host_i32(patch_rows), DType::I32);
  if (registers_ > 0) {
    tab.register_src = be.upload(host_i32(reg_src), DType::I32);
    tab.register_rows = be.upload(host_i32(reg_rows), DType::I32);
  }
  // Every tile of a batch has the same geometry: one rotary table repeated per tile.
  auto [cos1, sin1] = rope_tables(t, h, w);
  Tensor cos_all = Tensor::empty({B * n, rotary_dim_}, DType::F32);
  Tensor sin_all = Tensor::empty({B * n, rotary_dim_}, DType::F32);
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(cos_all.ptr<float>() + b * cos1.numel(), cos1.ptr<float>(), cos1.nbytes());
    std::memcpy(sin_all.ptr<float>() + b * sin1.numel(), sin1.ptr<float>(), sin1.nbytes());
  }
  tab.cos = be.upload(cos_all, DType::F32);
  tab.sin = be.upload(sin_all, DType::F32);
  for (int64_t b = 0; b <= B; ++b) tab.segments.push_back(b * n);  // tiles never attend to each other
  return tab;
}

void VideoVaeDecoder::forward_tiles(const Tensor& tokens, int64_t B, int64_t t, int64_t h, int64_t w,
                                    Tensor& features) {
  Backend& be = backend_;
  const DType g = gemm_dt_;
  const int64_t Z = config_.latent_channels, D = dim_, n_patch = t * h * w, n = n_patch + registers_ + 1;
  const int64_t rows = B * n;
  H3_CHECK(tokens.dim(0) == B * n_patch && tokens.dim(1) == Z && features.dim(0) == B * n_patch &&
               features.dim(1) == patch_features_,
           "video VAE: forward_tiles got tokens ", tokens.str(), " and features ", features.str(), " for ", B,
           " tiles of ", t, "x", h, "x", w);
  const BatchTables tab = batch_tables(B, t, h, w);

  // post_quant_conv (pointwise) and proj_in, then the residual stream [patches | registers | zero] per tile, f32.
  Tensor x = be.zeros({rows, D}, DType::F32);
  {
    Tensor quant = be.empty({B * n_patch, Z}, g);
    be.linear(tokens, post_quant_w_, &post_quant_b_, quant);
    Tensor embedded = be.empty({B * n_patch, D}, g);
    be.linear(quant, proj_in_w_, &proj_in_b_, embedded);
    be.scatter_rows(embedded, tab.patch_rows, x);
  }
  if (registers_ > 0) {  // the register tokens repeated per tile, then placed after each tile's patches
    Tensor repeated = be.empty({B * registers_, D}, DType::F32);
    be.gather_rows(register_tokens_, tab.register_src, repeated);
    be.scatter_rows(repeated, tab.register_rows, x);
  }

  AttentionSpec spec;
  spec.heads_q = spec.heads_kv = static_cast<int>(heads_);
  spec.head_dim = static_cast<int>(head_dim_);
  spec.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  spec.qk_norm = true;  // per-head RMSNorm without weight
  spec.qk_norm_eps = static_cast<float>(config_.decoder_norm_eps);
  spec.rotary_dim = static_cast<int>(rotary_dim_);
  spec.cos = &tab.cos;
  spec.sin = &tab.sin;
  spec.segments = tab.segments;

  const float eps = static_cast<float>(config_.decoder_norm_eps);
  // Equal FFN chunks of at most kFfnRowChunk rows (no small last GEMM).
  const int64_t pieces = (rows + kFfnRowChunk - 1) / kFfnRowChunk, chunk = (rows + pieces - 1) / pieces;
  Tensor normed = be.empty({rows, D}, g), qkv = be.empty({rows, 3 * D}, g), attn = be.empty({rows, D}, g);
  Tensor branch = be.empty({rows, D}, g), gate_value = be.empty({chunk, 2 * ffn_dim_}, g);
  Tensor hidden = be.empty({chunk, ffn_dim_}, g);
  // Each residual add is fused with the RMSNorm that reads its result (the next block's norm1 after the FFN);
  // the first block's norm1 has no residual before it, the last FFN's residual no norm after it.
  if (!blocks_.empty()) be.rms_norm(x, &blocks_.front().norm1, eps, normed);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    throw_if_cancelled();  // between transformer blocks of a tile batch
    const Block& blk = blocks_[i];
    be.linear(normed, blk.qkv_w, &blk.qkv_b, qkv);
    be.self_attention(qkv, spec, attn);
    be.linear(attn, blk.out_w, &blk.out_b, branch);
    be.residual_rms_norm(x, branch, &blk.scale1, &blk.norm2, eps, normed);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t m = std::min(chunk, rows - r0);
      Tensor gv = gate_value.slice(0, m), hid = hidden.slice(0, m), out = branch.slice(r0, r0 + m);
      be.linear(normed.slice(r0, r0 + m), blk.ff_in_w, &blk.ff_in_b, gv);
      be.swiglu(gv, /*value_first=*/true, hid);
      be.linear(hid, blk.ff_out_w, &blk.ff_out_b, out);
    }
    if (i + 1 < blocks_.size())
      be.residual_rms_norm(x, branch, &blk.scale2, &blocks_[i + 1].norm1, eps, normed);
    else
      be.residual_add(x, branch, &blk.scale2);
  }
  be.layer_norm(x, &norm_out_w_, &norm_out_b_, eps, normed);
  Tensor patches = be.empty({B * n_patch, D}, g);
  be.gather_rows(normed, tab.patch_rows, patches);  // drop the register and zero tokens
  be.linear(patches, proj_out_w_, &proj_out_b_, features);
}

Tensor VideoVaeDecoder::decode_tiles(const Tensor& rows, const Tensor& tile_rows, const VideoTileGrid& grid,
                                     int64_t tiles_per_batch) {
  Backend& be = backend_;
  const int64_t n_patch = grid.tile_tokens(), tiles = tile_rows.dim(0) / n_patch;
  Tensor features = be.empty({tiles * n_patch, patch_features_}, gemm_dt_);
  for (int64_t first = 0; first < tiles; first += tiles_per_batch) {
    throw_if_cancelled();  // between tile batches
    const int64_t B = std::min(tiles_per_batch, tiles - first), r0 = first * n_patch, r1 = (first + B) * n_patch;
    Tensor tokens = be.empty({B * n_patch, config_.latent_channels}, gemm_dt_);
    be.gather_rows(rows, tile_rows.slice(r0, r1), tokens);
    Tensor out = features.slice(r0, r1);
    forward_tiles(tokens, B, grid.latent_frames, grid.tile_latent_h, grid.tile_latent_w, out);
  }
  return features;
}

Tensor VideoVaeDecoder::decode_tile(const Tensor& raw_latents) {
  H3_CHECK(raw_latents.ndim() == 4 && raw_latents.dim(0) == config_.latent_channels,
           "video VAE: decode_tile takes [", config_.latent_channels, ", t, h, w] latents, got ", raw_latents.str());
  Backend& be = backend_;
  const int64_t t = raw_latents.dim(1), h = raw_latents.dim(2), w = raw_latents.dim(3);
  VideoTileGrid grid;
  grid.channels = config_.out_channels;
  grid.temporal_patch = geometry_.temporal_ratio;
  grid.spatial_patch = geometry_.spatial_ratio;
  grid.latent_frames = t;
  grid.tile_latent_h = h;
  grid.tile_latent_w = w;
  grid.y_starts = grid.x_starts = {0};
  std::vector<int32_t> identity(t * h * w);
  for (int64_t i = 0; i < t * h * w; ++i) identity[i] = static_cast<int32_t>(i);
  const Tensor rows = be.upload(windows_channels_last(as_f32(raw_latents), 0, 1, 0, t), gemm_dt_);
  const Tensor features = decode_tiles(rows, be.upload(host_i32(identity), DType::I32), grid, 1);
  Tensor canvas = be.empty({grid.channels, grid.frames(), grid.height(), grid.width()}, DType::F32);
  be.stitch_video_tiles(features, grid, 0, grid.frames(), canvas);
  return be.download(canvas);
}

// ---------------------------------------------------------------------------------------------------------------
// Tiles and chunks

Tensor VideoVaeDecoder::decode(const Tensor& latents, const TileOptions& options) {
  validate(latents, options);
  const int64_t s = geometry_.spatial_ratio, H = latents.dim(2) * s, W = latents.dim(3) * s;
  const int64_t frames = frames_for_latents(latents.dim(1));
  Tensor video = Tensor::empty({config_.out_channels, frames, H, W}, DType::F32);
  const int64_t plane = H * W;
  decode_streaming(latents, options, [&](const Tensor& piece, int64_t first) {
    const int64_t n = piece.dim(1);
    parallel_for(0, piece.dim(0) * n, 1, [&](int64_t p0, int64_t p1) {  // frame planes, while the next chunk runs
      for (int64_t cf = p0; cf < p1; ++cf)
        std::memcpy(video.ptr<float>() + ((cf / n) * frames + first + cf % n) * plane,
                    piece.ptr<float>() + cf * plane, plane * sizeof(float));
    });
  });
  return video;
}

Tensor VideoVaeDecoder::denormalized_latents(const Tensor& latents, int64_t pad) const {
  const int64_t C = latents.dim(0), T = latents.dim(1), Tp = T + pad, plane = latents.dim(2) * latents.dim(3);
  Tensor z = Tensor::empty({C, Tp, latents.dim(2), latents.dim(3)}, DType::F32);
  const Tensor src = as_f32(latents);
  for (int64_t c = 0; c < C; ++c) {
    const float std_c = static_cast<float>(config_.latents_std[c]), mean_c = static_cast<float>(config_.latents_mean[c]);
    for (int64_t f = 0; f < Tp; ++f) {
      const float* in = src.ptr<float>() + (c * T + std::min(f, T - 1)) * plane;
      float* out = z.ptr<float>() + (c * Tp + f) * plane;
      for (int64_t i = 0; i < plane; ++i) out[i] = in[i] * std_c + mean_c;
    }
  }
  return z;
}

void VideoVaeDecoder::decode_streaming(const Tensor& latents, const TileOptions& options, const FrameSink& sink) {
  validate(latents, options);
  Backend& be = backend_;
  const VideoVaeGeometry& g = geometry_;
  const int64_t T = latents.dim(1), h = latents.dim(2), w = latents.dim(3);
  const TemporalPlan plan = plan_temporal_chunks(g, T);
  const VideoVaeBatchPlan batches = plan_video_vae_batches(config_, T, h, w, options);
  const VideoTileGrid grid = window_tile_grid(g, config_.out_channels, h, w, options);
  const Tensor z = denormalized_latents(latents, plan.pad_latents);
  const int64_t group = batches.windows_per_group, window_tokens = grid.tiles() * grid.tile_tokens();
  const Tensor tile_rows = be.upload(host_i32(group_tile_rows(grid, h, w, group)), DType::I32);
  log_debug("video VAE decode: ", T, " latent frames (+", plan.pad_latents, " padding) in ", plan.num_chunks,
            " windows of ", grid.y_starts.size(), "x", grid.x_starts.size(), " tiles, ", group,
            " windows per group, ", batches.tiles_per_batch, " tiles per batch -> ", plan.total_frames, " frames");

  ChunkStream chunks(be, grid, g, plan.total_frames, pixel_mean_, pixel_std_, sink);
  for (int64_t first = 0; first < plan.num_chunks; first += group) {
    const int64_t count = std::min(group, plan.num_chunks - first);
    const Tensor rows =
        be.upload(windows_channels_last(z, first, count, g.tokens_chunk_size, g.window_latents()), gemm_dt_);
    const Tensor features =
        decode_tiles(rows, tile_rows.slice(0, count * window_tokens), grid, batches.tiles_per_batch);
    chunks.hand_over();  // the previous group's pixels go to the sink while this group's batches run
    for (int64_t k = 0; k < count; ++k) chunks.add_window(features.slice(k * window_tokens, (k + 1) * window_tokens));
  }
  chunks.finish();
}

}  // namespace h3

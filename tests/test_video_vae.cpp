// The MiniMax-H3 video VAE decoder: decode geometry (spec/video_vae.md §9) against the spec's tables, stitching and
// cross-fade order, the ViT against a float64 replica of §8, both checkpoint layouts, input validation, the
// `h3 tool vae-decode` command, and parity with the diffusers reference on the fixtures of tests/fixtures/video_vae.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "temp_dir.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/video_vae/decoder.h"
#include "models/video_vae/geometry.h"
#include "models/video_vae/stitch.h"
#include "models/video_vae/weights.h"

using namespace h3;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

Tensor randn(Shape shape, std::mt19937& g, float scale = 1.f, float mean = 0.f) {
  std::normal_distribution<float> n(0.f, 1.f);
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = mean + scale * n(g);
  return t;
}

// The diffusers unit-test decoder (spec §14) with the register/FFN/eps defaults the original config format implies:
// spatial ratio 4, temporal ratio 4, clip 17, token drop 3, 2 heads × 8 (rotary dims 6), 4 registers, FFN ×4.
VideoVaeConfig tiny_config() {
  VideoVaeConfig c;
  c.latent_channels = 4;
  c.block_out_channels = {8, 16};
  c.layers_per_block = 1;
  c.spatial_downsample_factors = {2, 2};
  c.temporal_downsample_factors = {2, 2};
  c.norm_num_groups = 8;
  c.decoder_num_layers = 2;
  c.decoder_num_attention_heads = 2;
  c.decoder_attention_head_dim = 8;
  c.latents_mean = {0.1, -0.3, 0.25, 0.0};
  c.latents_std = {0.8, 1.2, 0.6, 1.0};
  return c;
}

json diffusers_config_json(const VideoVaeConfig& c) {
  return {{"_class_name", "AutoencoderKLMiniMaxH3"},
          {"in_channels", c.in_channels},
          {"out_channels", c.out_channels},
          {"latent_channels", c.latent_channels},
          {"block_out_channels", c.block_out_channels},
          {"layers_per_block", c.layers_per_block},
          {"spatial_downsample_factors", c.spatial_downsample_factors},
          {"temporal_downsample_factors", c.temporal_downsample_factors},
          {"norm_num_groups", c.norm_num_groups},
          {"norm_eps", c.norm_eps},
          {"spatial_padding_mode", c.spatial_padding_mode},
          {"decoder_num_layers", c.decoder_num_layers},
          {"decoder_num_attention_heads", c.decoder_num_attention_heads},
          {"decoder_attention_head_dim", c.decoder_attention_head_dim},
          {"decoder_num_register_tokens", c.decoder_num_register_tokens},
          {"decoder_ffn_mult", c.decoder_ffn_mult},
          {"decoder_rope_theta", c.decoder_rope_theta},
          {"decoder_rope_dim_ratio", c.decoder_rope_dim_ratio},
          {"decoder_norm_eps", c.decoder_norm_eps},
          {"clip_length", c.clip_length},
          {"token_drop", c.token_drop},
          {"latents_mean", c.latents_mean},
          {"latents_std", c.latents_std}};
}

void write_json(const std::string& path, const json& j) { std::ofstream(path) << j.dump(2); }

// Random decoder weights by diffusers name: GEMM weights scaled by 1/sqrt(fan_in), norms around 1, and non-zero
// residual scales and register tokens (zero at init, which would make every block an identity).
std::map<std::string, Tensor> random_decoder_weights(const VideoVaeConfig& c, uint32_t seed) {
  std::mt19937 g(seed);
  std::map<std::string, Tensor> w;
  for (const TensorSpec& s : video_vae_manifest(c, Layout::Diffusers, false)) {
    const std::string& n = s.name;
    if (n.ends_with("norm1.weight") || n.ends_with("norm2.weight") || n.ends_with("norm_out.weight"))
      w[n] = randn(s.shape, g, 0.1f, 1.f);
    else if (n.ends_with(".bias") || n.ends_with("scale1") || n.ends_with("scale2"))
      w[n] = randn(s.shape, g, 0.3f);
    else if (n == "decoder.register_tokens")
      w[n] = randn(s.shape, g);
    else
      w[n] = randn(s.shape, g, 1.f / std::sqrt(static_cast<float>(s.shape[1])));
  }
  return w;
}

// A diffusers-layout `vae/` folder (decoder weights only) with random weights.
std::map<std::string, Tensor> write_diffusers_vae(const std::string& dir, const VideoVaeConfig& c, uint32_t seed) {
  fs::create_directories(dir);
  write_json(dir + "/config.json", diffusers_config_json(c));
  auto w = random_decoder_weights(c, seed);
  std::vector<NamedTensor> list;
  for (auto& [n, t] : w) list.push_back({n, t});
  write_safetensors(dir + "/diffusion_pytorch_model.safetensors", list);
  return w;
}

// The original release's `video_vae/` folder holding the same decoder (spec §11.2), built from diffusers weights.
void write_original_vae(const std::string& dir, const VideoVaeConfig& c, const std::map<std::string, Tensor>& w) {
  fs::create_directories(dir + "/source");
  write_json(dir + "/config.json", {{"latents_mean", c.latents_mean},
                                    {"latents_std", c.latents_std},
                                    {"vae_clip_length", c.clip_length},
                                    {"vae_token_drop", c.token_drop},
                                    {"vae_tile_size", 256},
                                    {"vae_tile_overlap_min", 64},
                                    {"source_path", "source"},
                                    {"source_safetensors_path", "model.safetensors"}});
  std::vector<int64_t> mult;
  for (int64_t ch : c.block_out_channels) mult.push_back(ch / c.block_out_channels[0]);
  write_json(dir + "/source/config.json",
             {{"z_channels", c.latent_channels},
              {"embed_dim", c.latent_channels},
              {"out_ch", c.out_channels},
              {"ch", c.block_out_channels[0]},
              {"ch_mult", mult},
              {"num_res_blocks", c.layers_per_block},
              {"space_down", c.spatial_downsample_factors},
              {"time_down", c.temporal_downsample_factors},
              {"padding_mode", c.spatial_padding_mode},
              {"vit_decoder_kwargs",
               {{"num_layers", c.decoder_num_layers},
                {"heads", c.decoder_num_attention_heads},
                {"dim_head", c.decoder_attention_head_dim},
                {"rope_theta", c.decoder_rope_theta},
                {"rope_dim_ratio", c.decoder_rope_dim_ratio}}}});
  const int64_t H = c.decoder_num_attention_heads, hd = c.decoder_attention_head_dim, D = c.decoder_dim();
  std::vector<NamedTensor> out;
  for (const auto& [name, t] : w) {
    auto rename = [&](const std::string& from, const std::string& to) {
      std::string n = name;
      return n.replace(n.find(from), from.size(), to);
    };
    if (name.find(".attn.to_q.") != std::string::npos) {
      // Interleave per head: [q_h | k_h | v_h] for h = 0..H-1 (rows of 64 in the release).
      const std::string suffix = name.substr(name.rfind('.'));
      const std::string p = name.substr(0, name.find(".attn.to_q."));
      const Tensor& q = w.at(p + ".attn.to_q" + suffix);
      const Tensor& k = w.at(p + ".attn.to_k" + suffix);
      const Tensor& v = w.at(p + ".attn.to_v" + suffix);
      const int64_t width = q.numel() / D;
      Shape shape = q.shape();
      shape[0] = 3 * D;
      Tensor fused = Tensor::empty(shape, DType::F32);
      for (int64_t h = 0; h < H; ++h)
        for (int which = 0; which < 3; ++which) {
          const Tensor& src = which == 0 ? q : which == 1 ? k : v;
          std::copy_n(src.ptr<float>() + h * hd * width, hd * width,
                      fused.ptr<float>() + (h * 3 + which) * hd * width);
        }
      out.push_back({p + ".attn.to_qkv" + suffix, fused});
    } else if (name.find(".attn.to_k.") != std::string::npos || name.find(".attn.to_v.") != std::string::npos) {
      continue;  // fused with to_q above
    } else if (name.find(".attn.to_out.0.") != std::string::npos) {
      out.push_back({rename(".to_out.0.", ".to_out."), t});
    } else if (name.find(".ff.net.0.proj.") != std::string::npos) {
      // Original order is [gate | value].
      Tensor swapped = Tensor::empty(t.shape(), DType::F32);
      const int64_t half = t.numel() / 2;
      std::copy_n(t.ptr<float>() + half, half, swapped.ptr<float>());
      std::copy_n(t.ptr<float>(), half, swapped.ptr<float>() + half);
      out.push_back({rename(".ff.net.0.proj.", ".ff.w1."), swapped});
    } else if (name.find(".ff.net.2.") != std::string::npos) {
      out.push_back({rename(".ff.net.2.", ".ff.w2."), t});
    } else if (name.starts_with("decoder.proj_in.")) {
      out.push_back({rename("proj_in.", "x_embedder."), t});
    } else {
      out.push_back({name, t});
    }
  }
  out.push_back({"decoder.mask_token", Tensor::zeros({1, 1, D}, DType::F32)});  // dropped by every loader
  write_safetensors(dir + "/source/model.safetensors", out);
}

// ---------------------------------------------------------------------------------------------------------------
// A float64 replica of the ViT decoder of spec §8 on one tile (plain loops, no backend), for the tiny config.
Tensor reference_vit(const VideoVaeConfig& c, const std::map<std::string, Tensor>& w, const Tensor& z) {
  auto W = [&](const std::string& n) { return w.at(n).ptr<float>(); };
  const int64_t Z = c.latent_channels, t = z.dim(1), h = z.dim(2), wd = z.dim(3), np = t * h * wd;
  const int64_t R = c.decoder_num_register_tokens, N = np + R + 1, D = c.decoder_dim();
  const int64_t H = c.decoder_num_attention_heads, hd = c.decoder_attention_head_dim, F = D * c.decoder_ffn_mult;
  const int64_t rot = static_cast<int64_t>(hd * c.decoder_rope_dim_ratio), nf = rot / 6;
  const int64_t r = c.temporal_ratio(), s = c.spatial_ratio();
  const double eps = c.decoder_norm_eps;
  using Mat = std::vector<std::vector<double>>;
  auto linear = [&](const Mat& x, const std::string& name, int64_t out, int64_t in) {
    const float* wt = W(name + ".weight");
    const float* b = W(name + ".bias");
    Mat y(x.size(), std::vector<double>(out));
    for (size_t i = 0; i < x.size(); ++i)
      for (int64_t o = 0; o < out; ++o) {
        double acc = b[o];
        for (int64_t k = 0; k < in; ++k) acc += x[i][k] * wt[o * in + k];
        y[i][o] = acc;
      }
    return y;
  };
  auto rms = [&](std::vector<double> v, const float* g) {
    double ss = 0;
    for (double e : v) ss += e * e;
    const double inv = 1 / std::sqrt(ss / v.size() + eps);
    for (size_t i = 0; i < v.size(); ++i) v[i] *= inv * (g ? g[i] : 1.0);
    return v;
  };
  Mat tok(np, std::vector<double>(Z));
  for (int64_t i = 0; i < np; ++i)
    for (int64_t ch = 0; ch < Z; ++ch) tok[i][ch] = z.ptr<float>()[ch * np + i];
  tok = linear(tok, "post_quant_conv", Z, Z);
  Mat x = linear(tok, "decoder.proj_in", D, Z);
  for (int64_t k = 0; k < R; ++k)
    x.emplace_back(W("decoder.register_tokens") + k * D, W("decoder.register_tokens") + (k + 1) * D);
  x.emplace_back(D, 0.0);
  // Angles [N, rot]: (t, y, x) blocks of nf frequencies, repeated twice.
  Mat ang(N, std::vector<double>(rot, 0.0));
  for (int64_t i = 0; i < np; ++i) {
    const double pos[3] = {(2.0 * (i / (h * wd)) + 1) / t - 1, (2.0 * ((i / wd) % h) + 1) / h - 1,
                           (2.0 * (i % wd) + 1) / wd - 1};
    for (int a = 0; a < 3; ++a)
      for (int64_t k = 0; k < nf; ++k) {
        const double f = std::pow(c.decoder_rope_theta, -static_cast<double>(k) / nf);
        ang[i][a * nf + k] = ang[i][rot / 2 + a * nf + k] = 2 * std::numbers::pi * pos[a] * f;
      }
  }
  for (int64_t layer = 0; layer < c.decoder_num_layers; ++layer) {
    const std::string p = "decoder.transformer_blocks." + std::to_string(layer) + ".";
    Mat a(N);
    for (int64_t i = 0; i < N; ++i) a[i] = rms(x[i], W(p + "norm1.weight"));
    Mat q = linear(a, p + "attn.to_q", D, D), k = linear(a, p + "attn.to_k", D, D), v = linear(a, p + "attn.to_v", D, D);
    for (Mat* m : {&q, &k})
      for (int64_t i = 0; i < N; ++i)
        for (int64_t hh = 0; hh < H; ++hh) {
          std::vector<double> head((*m)[i].begin() + hh * hd, (*m)[i].begin() + (hh + 1) * hd);
          head = rms(head, nullptr);
          std::vector<double> out = head;
          for (int64_t j = 0; j < rot / 2; ++j) {
            out[j] = head[j] * std::cos(ang[i][j]) - head[j + rot / 2] * std::sin(ang[i][j]);
            out[j + rot / 2] = head[j + rot / 2] * std::cos(ang[i][j + rot / 2]) + head[j] * std::sin(ang[i][j + rot / 2]);
          }
          std::copy(out.begin(), out.end(), (*m)[i].begin() + hh * hd);
        }
    Mat o(N, std::vector<double>(D, 0.0));
    for (int64_t hh = 0; hh < H; ++hh)
      for (int64_t i = 0; i < N; ++i) {
        std::vector<double> sc(N);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < N; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e) d += q[i][hh * hd + e] * k[j][hh * hd + e];
          sc[j] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[j]);
        }
        for (int64_t j = 0; j < N; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
        for (int64_t j = 0; j < N; ++j)
          for (int64_t e = 0; e < hd; ++e) o[i][hh * hd + e] += sc[j] / sum * v[j][hh * hd + e];
      }
    o = linear(o, p + "attn.to_out.0", D, D);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t e = 0; e < D; ++e) x[i][e] += o[i][e] * W(p + "scale1")[e];
    Mat b(N);
    for (int64_t i = 0; i < N; ++i) b[i] = rms(x[i], W(p + "norm2.weight"));
    Mat u = linear(b, p + "ff.net.0.proj", 2 * F, D);
    Mat hid(N, std::vector<double>(F));
    for (int64_t i = 0; i < N; ++i)
      for (int64_t e = 0; e < F; ++e) hid[i][e] = u[i][e] * (u[i][F + e] / (1 + std::exp(-u[i][F + e])));
    Mat f = linear(hid, p + "ff.net.2", D, F);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t e = 0; e < D; ++e) x[i][e] += f[i][e] * W(p + "scale2")[e];
  }
  Mat y(np);
  for (int64_t i = 0; i < np; ++i) {
    double mean = 0, var = 0;
    for (double e : x[i]) mean += e;
    mean /= D;
    for (double e : x[i]) var += (e - mean) * (e - mean);
    var /= D;
    y[i].resize(D);
    for (int64_t e = 0; e < D; ++e)
      y[i][e] = (x[i][e] - mean) / std::sqrt(var + eps) * W("decoder.norm_out.weight")[e] + W("decoder.norm_out.bias")[e];
  }
  const int64_t P = 3 * r * s * s;
  Mat feat = linear(y, "decoder.proj_out", P, D);
  Tensor out = Tensor::empty({3, r * t, s * h, s * wd}, DType::F32);
  for (int64_t i = 0; i < np; ++i)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t it = 0; it < r; ++it)
        for (int64_t iy = 0; iy < s; ++iy)
          for (int64_t ix = 0; ix < s; ++ix) {
            const int64_t tt = i / (h * wd), yy = (i / wd) % h, xx = i % wd;
            out.ptr<float>()[((ch * r * t + r * tt + it) * s * h + s * yy + iy) * s * wd + s * xx + ix] =
                static_cast<float>(feat[i][((ch * r + it) * s + iy) * s + ix]);
          }
  return out;
}

std::unique_ptr<VideoVaeDecoder> make_decoder(Backend& be, const VideoVaeConfig& c,
                                              const std::map<std::string, Tensor>& w) {
  return VideoVaeDecoder::create(be, c, [&](const std::string& n) { return w.at(n); });
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Pixels of a [C, F, H, W] decoder output, as decoders.py converts them (float32: y·std + mean, clamp [0, 1]).
Tensor pixels_of(const Tensor& y) {
  Tensor out = y.clone();
  const int64_t per_channel = y.numel() / y.dim(0);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t c = i / per_channel;
    out.ptr<float>()[i] = std::clamp(y.ptr<float>()[i] * kImageNetStd[c] + kImageNetMean[c], 0.f, 1.f);
  }
  return out;
}

// Raw latents z = latents·std + mean (float32 per channel), frames [f0, f1) with frames past the end repeating the
// last one.
Tensor denormalized_window(const VideoVaeConfig& c, const Tensor& latents, int64_t f0, int64_t f1) {
  const int64_t C = latents.dim(0), T = latents.dim(1), plane = latents.dim(2) * latents.dim(3);
  Tensor z = Tensor::empty({C, f1 - f0, latents.dim(2), latents.dim(3)}, DType::F32);
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t f = f0; f < f1; ++f)
      for (int64_t i = 0; i < plane; ++i)
        z.ptr<float>()[(ch * (f1 - f0) + f - f0) * plane + i] =
            latents.ptr<float>()[(ch * T + std::min(f, T - 1)) * plane + i] * static_cast<float>(c.latents_std[ch]) +
            static_cast<float>(c.latents_mean[ch]);
  return z;
}

Tensor frames_of(const Tensor& t, int64_t f0, int64_t f1) {
  const int64_t C = t.dim(0), F = t.dim(1), plane = t.dim(2) * t.dim(3);
  Tensor out = Tensor::empty({C, f1 - f0, t.dim(2), t.dim(3)}, DType::F32);
  for (int64_t c = 0; c < C; ++c)
    std::copy_n(t.ptr<float>() + (c * F + f0) * plane, (f1 - f0) * plane, out.ptr<float>() + c * (f1 - f0) * plane);
  return out;
}

int run_command(const std::string& cmd) {
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Geometry

TEST(VideoVaeGeometry, ReleaseDerivedConstants) {
  VideoVaeConfig c;
  c.latents_mean.assign(24, 0.0);
  c.latents_std.assign(24, 1.0);
  const VideoVaeGeometry g = video_vae_geometry(c);
  EXPECT_EQ(g.spatial_ratio, 16);
  EXPECT_EQ(g.temporal_ratio, 4);
  EXPECT_EQ(g.tokens_chunk_size, 5);
  EXPECT_EQ(g.token_overlap, 2);
  EXPECT_EQ(g.frame_pre_padding, 3);
  EXPECT_EQ(g.frame_overlap, 5);
  EXPECT_EQ(g.window_latents(), 7);
  EXPECT_EQ(g.main_frames(), 17);
  EXPECT_EQ(g.tail_frames(), 5);
}

TEST(VideoVaeGeometry, TileSplitMatchesSpecTable) {
  struct Row {
    int64_t length;
    std::vector<int64_t> starts, overlaps;
  };
  const std::vector<Row> table = {
      {256, {0}, {}},
      {100, {0}, {}},
      {512, {0, 128, 256}, {128, 128}},
      {768, {0, 160, 336, 512}, {96, 80, 80}},
      {1024, {0, 192, 384, 576, 768}, {64, 64, 64, 64}},
      {1344, {0, 176, 352, 528, 704, 896, 1088}, {80, 80, 80, 80, 64, 64}},
      {2048, {0, 176, 352, 528, 704, 880, 1056, 1232, 1408, 1600, 1792}, {80, 80, 80, 80, 80, 80, 80, 80, 64, 64}},
      {272, {0, 16}, {240}},
  };
  for (const Row& row : table) {
    const TileSplit s = split_tiles(row.length, 256, 64, 16);
    EXPECT_EQ(s.starts, row.starts) << row.length;
    EXPECT_EQ(s.overlaps, row.overlaps) << row.length;
    EXPECT_EQ(s.length, std::min<int64_t>(row.length, 256)) << row.length;
    EXPECT_EQ(s.starts.back() + s.length, row.length) << "tiles must end exactly at the canvas edge";
  }
}

TEST(VideoVaeGeometry, FrameCountsAndChunkPlan) {
  VideoVaeConfig c;
  c.latents_mean.assign(24, 0.0);
  c.latents_std.assign(24, 1.0);
  const VideoVaeGeometry g = video_vae_geometry(c);
  const std::map<int64_t, int64_t> spec = {{37, 124}, {7, 22}, {13, 43}, {6, 18}, {3, 9}, {1, 1}, {2, 5}, {12, 39}};
  for (auto [T, frames] : spec) EXPECT_EQ(plan_temporal_chunks(g, T).total_frames, frames) << "T = " << T;
  for (int64_t T = 1; T <= 200; ++T)
    EXPECT_EQ(plan_temporal_chunks(g, T).total_frames, 4 * T - 3 * ((T + 4) / 5)) << "closed form, T = " << T;
  // Pipeline lengths 5n+2 need no padding: n chunks, 17n+5 frames.
  for (int64_t n = 7; n <= 20; ++n) {
    const TemporalPlan p = plan_temporal_chunks(g, 5 * n + 2);
    EXPECT_EQ(p.pad_latents, 0);
    EXPECT_EQ(p.num_chunks, n);
    EXPECT_EQ(p.total_frames, 17 * n + 5);
  }
  // T < 3: FastVideo's extension pads one more clip; T = 3: the reference's own plan.
  EXPECT_EQ(plan_temporal_chunks(g, 1).pad_latents, 6);
  EXPECT_EQ(plan_temporal_chunks(g, 2).pad_latents, 5);
  EXPECT_EQ(plan_temporal_chunks(g, 3).pad_latents, 4);
  EXPECT_EQ(plan_temporal_chunks(g, 3).num_chunks, 1);
  EXPECT_THROW(plan_temporal_chunks(g, 0), Error);
}

// Windows per group and tiles per batch at the GPU batch size (65,536 tokens: 36 tiles of 7·16·16 + 4 + 1 = 1,797
// tokens), 124 frames (37 latents, 7 windows): a small canvas groups windows so its batches are as full as a large
// canvas's; a window of more tiles than a batch holds decodes alone, in several batches.
TEST(VideoVaeGeometry, BatchPlanGroupsWindowsOfSmallCanvases) {
  VideoVaeConfig c;
  c.latents_mean.assign(24, 0.0);
  c.latents_std.assign(24, 1.0);
  TileOptions o;
  o.max_batch_tokens = 65536;
  struct Row {
    int64_t width, height, tiles, windows_per_group, tiles_per_batch, groups;
  };
  const std::vector<Row> table = {
      {864, 480, 15, 2, 30, 4},    // 3 × 5 tiles; groups of 2 + 2 + 2 + 1 windows: 53,910 rows (the last 26,955)
      {1344, 768, 28, 1, 28, 7},   // one window per group: 50,316 rows
      {512, 512, 9, 4, 36, 2},     // 3 × 3 tiles; groups of 4 + 3 windows: 64,692 and 48,519 rows
      {256, 256, 1, 7, 7, 1},      // every window in one group (at most the 7 windows)
      {2048, 1024, 55, 1, 36, 7},  // 5 × 11 tiles: each window in batches of 36 + 19 tiles
  };
  for (const Row& r : table) {
    SCOPED_TRACE(std::to_string(r.width) + "x" + std::to_string(r.height));
    const VideoVaeBatchPlan p = plan_video_vae_batches(c, 37, r.height / 16, r.width / 16, o);
    EXPECT_EQ(p.windows, 7);
    EXPECT_EQ(p.tile_sequence, 1797);
    EXPECT_EQ(p.tiles_per_window, r.tiles);
    EXPECT_EQ(p.windows_per_group, r.windows_per_group);
    EXPECT_EQ(p.tiles_per_batch, r.tiles_per_batch);
    EXPECT_EQ(p.groups(), r.groups);
    EXPECT_LE(p.rows_per_batch(), o.max_batch_tokens);
  }
  // At least one tile per batch and one window per group, however small the budget.
  o.max_batch_tokens = 1;
  const VideoVaeBatchPlan one = plan_video_vae_batches(c, 37, 30, 54, o);
  EXPECT_EQ(one.windows_per_group, 1);
  EXPECT_EQ(one.tiles_per_batch, 1);
}

TEST(VideoVaeManifest, ReleaseDecoderAndCheckpointCounts) {
  VideoVaeConfig c;
  c.latents_mean.assign(24, 0.0);
  c.latents_std.assign(24, 1.0);
  auto count = [](const std::vector<TensorSpec>& m, const std::string& prefix) {
    int64_t n = 0;
    for (const TensorSpec& s : m)
      if (s.name.starts_with(prefix)) n += shape_numel(s.shape);
    return n;
  };
  const auto diffusers = video_vae_manifest(c, Layout::Diffusers, true);
  const auto original = video_vae_manifest(c, Layout::Original, true);
  // spec §1 / §11: 703 diffusers tensors, 2,603,868,984 elements; the ViT decoder 2,423,530,496 parameters.
  EXPECT_EQ(diffusers.size(), 703u);
  EXPECT_EQ(count(diffusers, ""), 2603868984);
  EXPECT_EQ(count(diffusers, "decoder."), 2423530496);
  // The original file holds the same elements re-laid, plus the unused 2,048-element decoder.mask_token.
  EXPECT_EQ(original.size(), 559u);
  EXPECT_EQ(count(original, ""), 2603868984);
}

// ---------------------------------------------------------------------------------------------------------------
// Stitching

TEST(VideoVaeStitch, BlendWeights) {
  EXPECT_EQ(blend_sample(10.f, 20.f, 0, 5), 10.f);
  EXPECT_FLOAT_EQ(blend_sample(10.f, 20.f, 1, 5), 10.f * 0.8f + 20.f * 0.2f);
  EXPECT_FLOAT_EQ(blend_sample(10.f, 20.f, 4, 5), 10.f * 0.2f + 20.f * 0.8f);
}

// Replays the reference's `_stitch_tiles` with whole-tile operations (blend a full tile, crop, concatenate) on a
// 2 × 3 grid with uneven overlaps and compares with the per-pixel implementation.
TEST(VideoVaeStitch, TileOrderMatchesReferenceComposition) {
  TileSplit ys, xs;
  ys.starts = {0, 4};
  ys.length = 8;
  ys.overlaps = {4};  // H = 12
  xs.starts = {0, 4, 10};
  xs.length = 8;
  xs.overlaps = {4, 2};  // W = 18
  std::vector<Tensor> tiles;
  std::mt19937 g(5);
  for (int k = 0; k < 6; ++k) tiles.push_back(randn({2, 3, 8, 8}, g, 1.f, 10.f * k));
  const Tensor canvas = stitch_tiles(tiles, ys, xs);
  ASSERT_EQ(canvas.shape(), (Shape{2, 3, 12, 18}));

  // Whole-tile blend along rows (axis 2) or columns (axis 3) of [C, F, H, W].
  auto blend = [](const Tensor& a, const Tensor& b, int64_t extent, int axis) {
    Tensor out = b.clone();
    const int64_t CF = b.dim(0) * b.dim(1), H = b.dim(2), W = b.dim(3);
    for (int64_t cf = 0; cf < CF; ++cf)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const int64_t p = axis == 2 ? y : x;
          if (p >= extent) continue;
          const int64_t ay = axis == 2 ? H - extent + y : y, ax = axis == 3 ? W - extent + x : x;
          const float av = a.ptr<float>()[(cf * H + ay) * W + ax];
          out.ptr<float>()[(cf * H + y) * W + x] = blend_sample(av, b.ptr<float>()[(cf * H + y) * W + x], p, extent);
        }
    return out;
  };
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      Tensor tile = tiles[i * 3 + j];
      if (i > 0) tile = blend(tiles[(i - 1) * 3 + j], tile, ys.overlaps[i - 1], 2);
      if (j > 0) tile = blend(tiles[i * 3 + j - 1], tile, xs.overlaps[j - 1], 3);  // the raw left tile
      const int64_t keep_y = i == 0 ? 8 - ys.overlaps[0] : 8, keep_x = j < 2 ? 8 - xs.overlaps[j] : 8;
      for (int64_t cf = 0; cf < 6; ++cf)
        for (int64_t y = 0; y < keep_y; ++y)
          for (int64_t x = 0; x < keep_x; ++x)
            ASSERT_EQ(canvas.ptr<float>()[(cf * 12 + ys.starts[i] + y) * 18 + xs.starts[j] + x],
                      tile.ptr<float>()[(cf * 8 + y) * 8 + x])
                << "tile " << i << "," << j << " at " << y << "," << x;
    }
  // The corner of tile (1, 1) blends with the *raw* left tile (1, 0): at local (1, 1), extents 4 and 4.
  auto raw = [&](int k, int64_t y, int64_t x) { return tiles[k].ptr<float>()[y * 8 + x]; };
  const float vertical = blend_sample(raw(1, 4 + 1, 1), raw(4, 1, 1), 1, 4);
  const float expected = blend_sample(raw(3, 1, 4 + 1), vertical, 1, 4);
  EXPECT_EQ(canvas.ptr<float>()[(4 + 1) * 18 + 4 + 1], expected);
}

TEST(VideoVaeStitch, CrossFadeBlendsFirstFramesWithPreviousTail) {
  std::mt19937 g(9);
  const Tensor prev = randn({3, 5, 2, 2}, g);
  const Tensor next0 = randn({3, 17, 2, 2}, g);
  Tensor next = next0.clone();
  cross_fade_frames(prev, next, 5);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t f = 0; f < 17; ++f)
      for (int64_t i = 0; i < 4; ++i) {
        const float b = next0.ptr<float>()[(c * 17 + f) * 4 + i];
        const float want = f < 5 ? blend_sample(prev.ptr<float>()[(c * 5 + f) * 4 + i], b, f, 5) : b;
        ASSERT_EQ(next.ptr<float>()[(c * 17 + f) * 4 + i], want);
      }
}

// ---------------------------------------------------------------------------------------------------------------
// The ViT and the decode loop on a tiny random model

// float32 backend vs a float64 replica of §8; the gap is float32 rounding through 2 blocks (≈1e-6 relative).
TEST(VideoVaeVit, TileMatchesFloat64Replica) {
  const VideoVaeConfig c = tiny_config();
  const auto w = random_decoder_weights(c, 11);
  auto be = make_cpu_backend();
  auto dec = make_decoder(*be, c, w);
  std::mt19937 g(12);
  const Tensor z = randn({4, 3, 2, 3}, g);
  const Tensor got = dec->decode_tile(z);
  const Tensor want = reference_vit(c, w, z);
  ASSERT_EQ(got.shape(), (Shape{3, 12, 8, 12}));
  EXPECT_LT(rel_l2(got, want), 1e-5);
  std::printf("[ measured ] float32 ViT vs float64 replica: rel L2 %.3g\n", rel_l2(got, want));
}

// Decoding several tiles as one batch of independent sequences gives exactly the per-tile results.
TEST(VideoVaeVit, BatchingTilesDoesNotChangeResults) {
  const VideoVaeConfig c = tiny_config();
  const auto w = random_decoder_weights(c, 13);
  auto be = make_cpu_backend();
  auto dec = make_decoder(*be, c, w);
  std::mt19937 g(14);
  const Tensor latents = randn({4, 3, 6, 8}, g);
  TileOptions one, all;
  one.tile = all.tile = 12;
  one.tile_overlap = all.tile_overlap = 4;
  one.max_batch_tokens = 1;
  all.max_batch_tokens = 1 << 20;
  EXPECT_TRUE(bitwise_equal(dec->decode(latents, one), dec->decode(latents, all)));
}

// Decoding several windows' tiles in one batch, or one window's tiles in several, changes the batching only: the
// video is the one decoded a tile at a time, a window at a time. 4 windows of 2 × 2 tiles (3 × 3 latents: sequences
// of 7·9 + 4 + 1 = 68 tokens). Exact equality: each tile is its own attention segment and the CPU backend's linear
// sums every output over K in an order fixed by K alone, whatever the row count (on a GPU a GEMM over more rows may
// pick another kernel and round differently; test_pipeline_cuda.cpp holds that path to the CPU within fp16
// tolerances).
TEST(VideoVaeDecode, GroupingWindowsDoesNotChangeResults) {
  const VideoVaeConfig c = tiny_config();
  auto be = make_cpu_backend();
  auto dec = make_decoder(*be, c, random_decoder_weights(c, 29));
  std::mt19937 g(30);
  const Tensor latents = randn({4, 22, 4, 4}, g);  // 16 × 16 px, 4 windows
  auto options = [](int64_t max_batch_tokens) {
    TileOptions o;
    o.tile = 12;
    o.tile_overlap = 4;
    o.max_batch_tokens = max_batch_tokens;
    return o;
  };
  struct Case {
    int64_t max_batch_tokens, windows_per_group, tiles_per_batch;
  };
  const std::vector<Case> cases = {
      {68, 1, 1},        // one tile per batch, one window per group: the reference
      {3 * 68, 1, 3},    // each window in batches of 3 + 1 tiles
      {12 * 68, 3, 12},  // groups of 3 + 1 windows (4 is not a multiple of 3); a batch holds 3 windows
      {1 << 20, 4, 16},  // everything in one group and one batch
  };
  const std::vector<std::pair<int64_t, int64_t>> chunks = {{0, 17}, {17, 17}, {34, 17}, {51, 17}, {68, 5}};
  Tensor reference;
  for (const Case& k : cases) {
    SCOPED_TRACE("max_batch_tokens " + std::to_string(k.max_batch_tokens));
    const TileOptions o = options(k.max_batch_tokens);
    const VideoVaeBatchPlan p = plan_video_vae_batches(c, 22, 4, 4, o);
    ASSERT_EQ(p.windows, 4);
    ASSERT_EQ(p.tiles_per_window, 4);
    ASSERT_EQ(p.tile_sequence, 68);
    ASSERT_EQ(p.windows_per_group, k.windows_per_group);
    ASSERT_EQ(p.tiles_per_batch, k.tiles_per_batch);
    // The same chunks in the same order, whatever the grouping.
    std::vector<std::pair<int64_t, int64_t>> pieces;
    Tensor video = Tensor::zeros({3, 73, 16, 16}, DType::F32);
    dec->decode_streaming(latents, o, [&](const Tensor& frames, int64_t first) {
      pieces.push_back({first, frames.dim(1)});
      for (int64_t ch = 0; ch < 3; ++ch)
        std::memcpy(video.ptr<float>() + (ch * 73 + first) * 256, frames.ptr<float>() + ch * frames.dim(1) * 256,
                    frames.dim(1) * 256 * sizeof(float));
    });
    EXPECT_EQ(pieces, chunks);
    if (!reference.defined()) {
      reference = video;
      EXPECT_TRUE(bitwise_equal(reference, dec->decode(latents, o))) << "streamed chunks assemble into decode()";
      continue;
    }
    EXPECT_TRUE(bitwise_equal(video, reference)) << "max |d| " << max_abs_diff(video, reference);
  }
  // Five batch sizes (1, 3, 12, 4 and 16 tiles) of one tile shape went through: the decoder keeps one set of row
  // tables, for the largest batch, and a smaller batch decoded afterwards (3 tiles: a prefix of those tables) gives
  // the same video.
  EXPECT_EQ(dec->cached_table_tiles(), 16);
  EXPECT_TRUE(bitwise_equal(dec->decode(latents, options(3 * 68)), reference));
  EXPECT_EQ(dec->cached_table_tiles(), 16);
}

// The chunk loop against its definition: windows [5c, 5c+7) decoded alone, frames [3, 20) kept, the previous tail
// [23, 28) cross-faded over the first 5, the last tail appended, then pixel conversion.
TEST(VideoVaeDecode, TemporalChunksMatchManualComposition) {
  const VideoVaeConfig c = tiny_config();
  const auto w = random_decoder_weights(c, 15);
  auto be = make_cpu_backend();
  auto dec = make_decoder(*be, c, w);
  std::mt19937 g(16);
  const Tensor latents = randn({4, 12, 2, 2}, g);
  const Tensor video = dec->decode(latents);
  ASSERT_EQ(video.shape(), (Shape{3, 39, 8, 8}));
  const Tensor d0 = dec->decode_tile(denormalized_window(c, latents, 0, 7));
  const Tensor d1 = dec->decode_tile(denormalized_window(c, latents, 5, 12));
  Tensor main1 = frames_of(d1, 3, 20);
  cross_fade_frames(frames_of(d0, 23, 28), main1, 5);
  const Tensor parts[3] = {frames_of(d0, 3, 20), main1, frames_of(d1, 23, 28)};
  int64_t f = 0;
  for (const Tensor& part : parts) {
    EXPECT_TRUE(bitwise_equal(frames_of(video, f, f + part.dim(1)), pixels_of(part))) << "frames from " << f;
    f += part.dim(1);
  }
}

// Padding for T not of the form 5n+2 and the trim of the frames it produced: T = 3 → one window of latents
// [z0, z1, z2, z2, z2, z2, z2], frames [3, 12) kept.
TEST(VideoVaeDecode, ShortInputsArePaddedAndTrimmed) {
  const VideoVaeConfig c = tiny_config();
  const auto w = random_decoder_weights(c, 17);
  auto be = make_cpu_backend();
  auto dec = make_decoder(*be, c, w);
  std::mt19937 g(18);
  const Tensor latents = randn({4, 3, 1, 2}, g);
  const Tensor video = dec->decode(latents);
  ASSERT_EQ(video.shape(), (Shape{3, 9, 4, 8}));
  const Tensor d = dec->decode_tile(denormalized_window(c, latents, 0, 7));
  EXPECT_TRUE(bitwise_equal(video, pixels_of(frames_of(d, 3, 12))));
  for (int64_t T : {1, 2}) {
    const Tensor v = dec->decode(randn({4, T, 1, 1}, g));
    EXPECT_EQ(v.dim(1), T == 1 ? 1 : 5);
  }
}

// Spatial tiling against its definition: every tile decoded alone with its own positions, then stitched.
TEST(VideoVaeDecode, SpatialTilesMatchManualStitch) {
  const VideoVaeConfig c = tiny_config();
  const auto w = random_decoder_weights(c, 19);
  auto be = make_cpu_backend();
  auto dec = make_decoder(*be, c, w);
  std::mt19937 g(20);
  const Tensor latents = randn({4, 7, 6, 8}, g);  // 24 × 32 px
  TileOptions o;
  o.tile = 12;
  o.tile_overlap = 4;
  const Tensor video = dec->decode(latents, o);
  const TileSplit ys = split_tiles(24, 12, 4, 4), xs = split_tiles(32, 12, 4, 4);
  ASSERT_EQ(ys.starts, (std::vector<int64_t>{0, 4, 12}));
  ASSERT_EQ(xs.starts, (std::vector<int64_t>{0, 4, 12, 20}));
  const Tensor z = denormalized_window(c, latents, 0, 7);
  std::vector<Tensor> tiles;
  for (int64_t y0 : ys.starts)
    for (int64_t x0 : xs.starts) {
      Tensor t = Tensor::empty({4, 7, 3, 3}, DType::F32);
      for (int64_t ct = 0; ct < 28; ++ct)
        for (int64_t y = 0; y < 3; ++y)
          for (int64_t x = 0; x < 3; ++x)
            t.ptr<float>()[(ct * 3 + y) * 3 + x] = z.ptr<float>()[(ct * 6 + y0 / 4 + y) * 8 + x0 / 4 + x];
      tiles.push_back(dec->decode_tile(t));
    }
  // One window (T = 7): frames [3, 20) then the tail [23, 28).
  auto single_window = [](const Tensor& d) {
    const Tensor main = pixels_of(frames_of(d, 3, 20)), tail = pixels_of(frames_of(d, 23, 28));
    return std::pair{main, tail};
  };
  const auto [main, tail] = single_window(stitch_tiles(tiles, ys, xs));
  EXPECT_TRUE(bitwise_equal(frames_of(video, 0, 17), main));
  EXPECT_TRUE(bitwise_equal(frames_of(video, 17, 22), tail));
  // A tile at least as large as the canvas decodes untiled: one sequence over the whole window.
  o.tile = 64;
  const Tensor untiled = dec->decode(latents, o);
  const auto [umain, utail] = single_window(dec->decode_tile(z));
  EXPECT_TRUE(bitwise_equal(frames_of(untiled, 0, 17), umain));
  EXPECT_TRUE(bitwise_equal(frames_of(untiled, 17, 22), utail));
  EXPECT_FALSE(bitwise_equal(untiled, video)) << "tiles see their own positions and context";
}

TEST(VideoVaeDecode, StreamingDeliversChunksInOrder) {
  const VideoVaeConfig c = tiny_config();
  auto be = make_cpu_backend();
  auto dec = make_decoder(*be, c, random_decoder_weights(c, 21));
  std::mt19937 g(22);
  const Tensor latents = randn({4, 17, 1, 1}, g);  // 3 chunks → 17 + 17 + 17 + 5 frames
  std::vector<std::pair<int64_t, int64_t>> pieces;
  Tensor whole = dec->decode(latents);
  dec->decode_streaming(latents, {}, [&](const Tensor& frames, int64_t first) {
    pieces.push_back({first, frames.dim(1)});
    EXPECT_TRUE(bitwise_equal(frames, frames_of(whole, first, first + frames.dim(1))));
  });
  EXPECT_EQ(pieces, (std::vector<std::pair<int64_t, int64_t>>{{0, 17}, {17, 17}, {34, 17}, {51, 5}}));
  EXPECT_EQ(whole.dim(1), dec->frames_for_latents(17));
}

// ---------------------------------------------------------------------------------------------------------------
// Loading

TEST(VideoVaeLoader, OriginalLayoutEqualsDiffusersLayout) {
  TempDir dir("vvae");
  // The original configs state no group count: the release's 32 (spec/video_vae.md §2), which the encoder's channels
  // must be multiples of, as the reference's GroupNorm requires.
  VideoVaeConfig c = tiny_config();
  c.block_out_channels = {32, 32};
  c.norm_num_groups = 32;
  const auto w = write_diffusers_vae(dir / "vae", c, 23);
  write_original_vae(dir / "video_vae", c, w);
  const Component dc = video_vae_component_at(dir / "vae"), oc = video_vae_component_at(dir / "video_vae");
  ASSERT_EQ(dc.layout, Layout::Diffusers);
  ASSERT_EQ(oc.layout, Layout::Original);
  const VideoVaeConfig oconf = load_video_vae_config(oc);
  EXPECT_EQ(oconf.decoder_num_layers, c.decoder_num_layers);
  EXPECT_EQ(oconf.latents_std, c.latents_std);

  const auto dsrc = diffusers_video_vae_source(Checkpoint::open(dc.weights));
  const auto osrc = original_video_vae_source(Checkpoint::open(oc.weights), oconf);
  for (const TensorSpec& s : video_vae_manifest(c, Layout::Diffusers, false))
    EXPECT_TRUE(bitwise_equal(dsrc(s.name), osrc(s.name))) << s.name;

  auto be = make_cpu_backend();
  auto a = VideoVaeDecoder::load(*be, dc);
  auto b = VideoVaeDecoder::load(*be, oc);
  std::mt19937 g(24);
  const Tensor latents = randn({4, 7, 2, 3}, g);
  EXPECT_TRUE(bitwise_equal(a->decode(latents), b->decode(latents)));
}

TEST(VideoVaeLoader, ReportsMissingAndMisshapenTensors) {
  const VideoVaeConfig c = tiny_config();
  auto w = random_decoder_weights(c, 25);
  auto be = make_cpu_backend();
  w["decoder.proj_out.bias"] = Tensor::zeros({5}, DType::F32);
  try {
    make_decoder(*be, c, w);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decoder.proj_out.bias"), std::string::npos) << e.what();
  }
  TempDir dir("vvae");
  write_diffusers_vae(dir / "vae", c, 26);
  EXPECT_THROW(video_vae_component_at(dir / "nothing"), Error);
}

// ---------------------------------------------------------------------------------------------------------------
// Validation

TEST(VideoVaeValidation, RejectsBadInputsWithClearMessages) {
  const VideoVaeConfig c = tiny_config();  // 4 channels, spatial ratio 4
  auto message = [&](const Tensor& latents, const TileOptions& o) -> std::string {
    try {
      validate_video_vae_decode(c, latents, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const Tensor ok = Tensor::zeros({4, 7, 2, 2}, DType::F32);
  EXPECT_EQ(message(ok, {}), "");
  EXPECT_NE(message(Tensor::zeros({3, 7, 2, 2}, DType::F32), {}).find("latent_channels = 4"), std::string::npos);
  EXPECT_NE(message(Tensor::zeros({4, 0, 2, 2}, DType::F32), {}).find("must each be >= 1"), std::string::npos);
  EXPECT_NE(message(Tensor::zeros({4, 7, 2, 0}, DType::F32), {}).find("must each be >= 1"), std::string::npos);
  EXPECT_NE(message(Tensor::zeros({1, 4, 7, 2, 2}, DType::F32), {}).find("[channels, frames, height, width]"),
            std::string::npos);
  TileOptions o;
  o.tile = 10;
  EXPECT_NE(message(ok, o).find("multiple of the spatial compression ratio (4 px), got 10"), std::string::npos);
  o.tile = 0;
  EXPECT_NE(message(ok, o).find("got 0 px"), std::string::npos);
  o.tile = 16;
  o.tile_overlap = 16;
  EXPECT_NE(message(ok, o).find("in [0, tile = 16), got 16"), std::string::npos);
  o.tile_overlap = 6;
  EXPECT_NE(message(ok, o).find("multiple of 4 px"), std::string::npos);
  o.tile_overlap = -4;
  EXPECT_NE(message(ok, o), "");
  o.tile_overlap = 0;
  EXPECT_EQ(message(ok, o), "");
}

// ---------------------------------------------------------------------------------------------------------------
// The command line tool

TEST(VideoVaeTool, DecodesLatentsFileLikeTheLibrary) {
  TempDir dir("vvae");
  const VideoVaeConfig c = tiny_config();
  write_diffusers_vae(dir / "vae", c, 27);
  std::mt19937 g(28);
  const Tensor latents = randn({1, 4, 7, 4, 5}, g);
  write_safetensors(dir / "in.safetensors", {{"latents", latents}});
  const std::string base = std::string(H3_BINARY) + " tool vae-decode --vae " + (dir / "vae") + " --latents " +
                           (dir / "in.safetensors") + " --device cpu";
  ASSERT_EQ(run_command(base + " --out " + (dir / "out.safetensors") + " --tile 8 --tile-overlap 4 2>/dev/null"), 0);
  const auto out = SafetensorsFile::open(dir / "out.safetensors");
  const Tensor video = out->tensor("video");
  ASSERT_EQ(video.shape(), (Shape{1, 3, 22, 16, 20}));

  auto be = make_cpu_backend();
  auto dec = VideoVaeDecoder::load(*be, video_vae_component_at(dir / "vae"));
  TileOptions o;
  o.tile = 8;
  o.tile_overlap = 4;
  EXPECT_TRUE(bitwise_equal(video.reshape({3, 22, 16, 20}), dec->decode(latents.reshape({4, 7, 4, 5}), o)));

  // Usage errors exit 2, decode errors 1, and nothing is written.
  EXPECT_EQ(run_command(base + " 2>/dev/null"), 2);
  EXPECT_EQ(run_command(base + " --out " + (dir / "bad.safetensors") + " --device tpu 2>/dev/null"), 2);
  EXPECT_EQ(run_command(base + " --out " + (dir / "bad.safetensors") + " --tile 8px 2>/dev/null"), 2);
  EXPECT_EQ(run_command(std::string(H3_BINARY) + " tool vae-decode --help >/dev/null"), 0);
  EXPECT_EQ(run_command(base + " --out " + (dir / "bad.safetensors") + " --tile 10 2>/dev/null"), 1);
  EXPECT_FALSE(fs::exists(dir / "bad.safetensors"));
}

// ---------------------------------------------------------------------------------------------------------------
// Parity with the diffusers reference (fixtures from tools/reference/fx_video_vae.py: MiniMaxH3VideoDecodeStep on
// CPU in float32, no autocast). Relative L2 ≤ 1e-5: both sides compute in float32; the differences are summation
// order and libm ulps (measured ≈6e-8 on every case, max |d| ≤ 2e-7).

TEST(VideoVaeFixtures, MatchDiffusersReference) {
  const std::string root = std::string(H3_SOURCE_DIR) + "/tests/fixtures/video_vae/";
  const std::vector<std::string> cases = {"one_tile_t7", "two_chunks_t12", "tiles_2d_t3", "t6"};
  auto be = make_cpu_backend();
  for (const std::string& name : cases) {
    SCOPED_TRACE(name);
    const std::string dir = root + name;
    if (!fs::exists(dir + "/expected.safetensors")) {
      ADD_FAILURE() << "missing fixture " << dir << " (made by tools/reference/fx_video_vae.py, branch ref-fixtures)";
      continue;
    }
    const auto in = SafetensorsFile::open(dir + "/case.safetensors");
    const Tensor latents = in->tensor("latents").to(DType::F32);
    TileOptions o;
    o.tile = static_cast<int64_t>(in->tensor("tile").at(0));
    o.tile_overlap = static_cast<int64_t>(in->tensor("tile_overlap").at(0));
    const Tensor expected = SafetensorsFile::open(dir + "/expected.safetensors")->tensor("video").to(DType::F32);
    auto dec = VideoVaeDecoder::load(*be, video_vae_component_at(dir + "/vae"));
    const Tensor video =
        dec->decode(latents.reshape({latents.dim(1), latents.dim(2), latents.dim(3), latents.dim(4)}), o);
    ASSERT_EQ(expected.numel(), video.numel());
    ASSERT_EQ(expected.dim(2), video.dim(1));
    const double err = rel_l2(video, expected);
    EXPECT_LE(err, 1e-5) << "max |d| " << max_abs_diff(video, expected);
    std::printf("[ fixture  ] video_vae/%s: %s rel L2 %.3g, max |d| %.3g\n", name.c_str(),
                shape_str(expected.shape()).c_str(), err, max_abs_diff(video, expected));
  }
}

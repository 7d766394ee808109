// Test helpers of the DiT tests (test_dit*.cpp): small random model configs, checkpoint writers in both layouts (and
// AdaLN gates a test controls), packed cases, an independent float64 evaluation of the reference forward (with the
// speed controls' definitions), and a scratch-folder fixture.
#pragma once
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/dit/dit.h"
#include "models/dit/dit_fasth3.h"
#include "models/dit/dit_embed.h"
#include "random_tensor.h"

namespace h3::dit_test {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------------------------
// Small random models and cases.

// heads x head_dim = 32 != hidden 24; 2·3·2 = 12 of 16 channels rotated (the diffusers unit-test shape).
inline DitConfig config_a() {
  DitConfig c;
  c.num_attention_heads = 2;
  c.attention_head_dim = 16;
  c.hidden_size = 24;
  c.num_layers = 2;
  c.num_refiner_layers = 2;
  c.ffn_dim = 32;
  c.in_channels = 4;
  c.audio_in_channels = 6;
  c.text_dim = 8;
  c.freq_dim = 8;
  c.time_embed_hidden_dim = 24;
  c.time_embed_dim = 16;
  c.rope_freq_dim = 2;
  return c;
}

// 2 x 24 = 48 != hidden 32, 18 of 24 rotated, three blocks, one refiner block, non-default theta and epsilons.
inline DitConfig config_b() {
  DitConfig c = config_a();
  c.attention_head_dim = 24;
  c.hidden_size = 32;
  c.num_layers = 3;
  c.num_refiner_layers = 1;
  c.ffn_dim = 40;
  c.text_dim = 10;
  c.freq_dim = 12;
  c.time_embed_hidden_dim = 28;
  c.time_embed_dim = 20;
  c.rope_freq_dim = 3;
  c.rope_theta = 1000.0;
  c.norm_eps = 1e-6;
  c.final_norm_eps = 1e-6;
  return c;
}

inline json diffusers_config_json(const DitConfig& c) {
  return {{"_class_name", "MiniMaxH3Transformer3DModel"},
          {"num_attention_heads", c.num_attention_heads},
          {"attention_head_dim", c.attention_head_dim},
          {"hidden_size", c.hidden_size},
          {"num_layers", c.num_layers},
          {"num_refiner_layers", c.num_refiner_layers},
          {"ffn_dim", c.ffn_dim},
          {"in_channels", c.in_channels},
          {"audio_in_channels", c.audio_in_channels},
          {"patch_size", {c.patch_size[0], c.patch_size[1], c.patch_size[2]}},
          {"text_dim", c.text_dim},
          {"freq_dim", c.freq_dim},
          {"time_embed_hidden_dim", c.time_embed_hidden_dim},
          {"time_embed_dim", c.time_embed_dim},
          {"rope_freq_dim", c.rope_freq_dim},
          {"rope_theta", c.rope_theta},
          {"norm_eps", c.norm_eps},
          {"qk_norm_eps", c.qk_norm_eps},
          {"final_norm_eps", c.final_norm_eps}};
}

inline json original_config_json(const DitConfig& c) {
  return {{"_class_name", "MiniMaxH3DiTModel"},
          {"hidden_size", c.hidden_size},
          {"num_layers", c.num_layers},
          {"token_refiner_num_layers", c.num_refiner_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"attention_head_dim", c.attention_head_dim},
          {"ffn_hidden_size", c.ffn_dim},
          {"latents_dim", c.in_channels},
          {"audio_latents_dim", c.audio_in_channels},
          {"patch_size", {c.patch_size[0], c.patch_size[1], c.patch_size[2]}},
          {"text_dim", c.text_dim},
          {"timestep_input_dim", c.freq_dim},
          {"time_embed_hidden_size", c.time_embed_hidden_dim},
          {"time_embed_dim", c.time_embed_dim},
          {"adaln_out_features", 18 * c.hidden_size},
          {"final_adaln_out_features", 2 * c.hidden_size},
          {"rope_inv_freq_len", c.rope_freq_dim},
          {"qk_norm_eps", c.qk_norm_eps}};
}

inline void write_json(const std::string& path, const json& j) { std::ofstream(path) << j.dump(2); }

inline bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
inline bool ends_with(const std::string& s, const std::string& p) { return s.size() >= p.size() && s.ends_with(p); }

// Random weights for a diffusers-layout folder: norm weights 1 + 0.1·n, biases 0.1·n, matrices n / sqrt(fan_in).
// The float32 modules are F32; everything else `dt` (F32, or BF16 as in the release).
inline void write_diffusers_model(const std::string& dir, const DitConfig& c, uint32_t seed, DType dt) {
  fs::create_directories(dir);
  write_json(dir + "/config.json", diffusers_config_json(c));
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<NamedTensor> tensors;
  for (const TensorSpec& s : dit_manifest(c, Layout::Diffusers)) {
    Tensor t = Tensor::empty(s.shape, DType::F32);
    float* p = t.ptr<float>();
    bool norm = false;
    for (const char* suffix : {"norm.weight", "norm1.weight", "norm2.weight", "norm_q.weight", "norm_k.weight"})
      norm = norm || ends_with(s.name, suffix);
    const float fan_in = s.shape.size() == 2 ? static_cast<float>(s.shape[1]) : 1.f;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float r = n(g);
      p[i] = norm ? 1.f + 0.1f * r : s.shape.size() == 1 ? 0.1f * r : r / std::sqrt(fan_in);
    }
    tensors.push_back({s.name, s.dtype == DType::F32 ? t : t.to(dt)});
  }
  write_safetensors(dir + "/diffusion_pytorch_model.safetensors", tensors);
}

// The original release's layout written from a diffusers-layout folder (layout.md §3.3, written independently of
// the loader): renamed keys, per-head interleaved qkv_proj, fc1 as [gate; value], rope.inv_freq, original config
// field names. The config must use the converter's constants (rope_theta 10000, norm epsilons 1e-5).
inline void write_original_from_diffusers(const std::string& src, const std::string& dst, const DitConfig& c) {
  fs::create_directories(dst);
  write_json(dst + "/config.json", original_config_json(c));
  const Checkpoint ck = Checkpoint::open(src);
  const std::vector<std::pair<std::string, std::string>> prefixes = {
      {"proj_in.", "video_patch_proj."},
      {"audio_proj_in.", "audio_patch_proj."},
      {"context_embedder.", "condition_proj."},
      {"time_embedder.linear_1.", "time_embedder.proj_in."},
      {"time_embedder.linear_2.", "time_embedder.proj_out."},
      {"token_refiner.refiner_blocks.", "token_refiner.blocks."},
      {"transformer_blocks.", "blocks."},
      {"norm_out.norm.", "final_layer.norm."},
      {"norm_out.linear.", "final_layer.adaln_proj.linear."},
      {"proj_out.", "final_layer.video_out."},
      {"audio_proj_out.", "final_layer.audio_out."}};
  const std::vector<std::pair<std::string, std::string>> infixes = {{".attn.norm_q.", ".attn.q_norm."},
                                                                    {".attn.norm_k.", ".attn.k_norm."},
                                                                    {".attn.to_out.0.", ".attn.out_proj."},
                                                                    {".ff.net.2.", ".mlp.fc2."}};
  auto rename = [&](std::string k) {
    for (const auto& [from, to] : prefixes)
      if (starts_with(k, from)) {
        k = to + k.substr(from.size());
        break;
      }
    for (const auto& [from, to] : infixes)
      if (size_t at = k.find(from); at != std::string::npos) k.replace(at, from.size(), to);
    return k;
  };
  const int64_t H = c.num_attention_heads, Hd = c.attention_head_dim, D = c.hidden_size, F = c.ffn_dim;
  std::vector<NamedTensor> out;
  for (const std::string& k : ck.names()) {
    const Tensor t = ck.get(k);
    const size_t row_bytes = t.ndim() == 2 ? t.dim(1) * dtype_size(t.dtype()) : 0;
    if (ends_with(k, ".attn.to_k.weight") || ends_with(k, ".attn.to_v.weight")) continue;
    if (ends_with(k, ".attn.to_q.weight")) {
      const std::string p = k.substr(0, k.size() - std::string("to_q.weight").size());
      const Tensor parts[3] = {t, ck.get(p + "to_k.weight"), ck.get(p + "to_v.weight")};
      Tensor qkv = Tensor::empty({3 * H * Hd, D}, t.dtype());
      for (int64_t h = 0; h < H; ++h)
        for (int s = 0; s < 3; ++s)
          std::memcpy(static_cast<char*>(qkv.data()) + (h * 3 * Hd + s * Hd) * row_bytes,
                      static_cast<const char*>(parts[s].data()) + h * Hd * row_bytes, Hd * row_bytes);
      out.push_back({rename(p + "qkv_proj.weight"), qkv});
    } else if (ends_with(k, ".ff.net.0.proj.weight")) {  // [value; gate] → [gate; value]
      Tensor fc1 = Tensor::empty(t.shape(), t.dtype());
      std::memcpy(fc1.data(), static_cast<const char*>(t.data()) + F * row_bytes, F * row_bytes);
      std::memcpy(static_cast<char*>(fc1.data()) + F * row_bytes, t.data(), F * row_bytes);
      std::string name = rename(k);
      name.replace(name.find(".ff.net.0.proj."), std::string(".ff.net.0.proj.").size(), ".mlp.fc1.");
      out.push_back({name, fc1});
    } else {
      out.push_back({rename(k), t.clone()});
    }
  }
  std::vector<float> inv(c.rope_freq_dim);
  for (int64_t k = 0; k < c.rope_freq_dim; ++k)
    inv[k] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * k / (2.0 * c.rope_freq_dim)));
  out.push_back({"rope.inv_freq", Tensor::from_f32({c.rope_freq_dim}, inv)});
  // Two shards, no index: the loader reads every *.safetensors of the folder.
  const size_t half = out.size() / 2;
  write_safetensors(dst + "/model-00001-of-00002.safetensors", {out.begin(), out.begin() + half});
  write_safetensors(dst + "/model-00002-of-00002.safetensors", {out.begin() + half, out.end()});
}

// A packed layout like the pipelines build (text, then audio, then video rows; some text rows tagged video as a
// vision block is), optionally moved to a random permutation of the sequence, with T timesteps.
inline DitForwardArgs make_case(const DitConfig& c, int64_t Nt, int64_t Na, int64_t Nv, std::vector<float> timesteps,
                         uint32_t seed, bool permute) {
  std::mt19937 g(seed);
  const int64_t L = Nt + Na + Nv, T = static_cast<int64_t>(timesteps.size());
  std::vector<int64_t> pos(L);
  for (int64_t i = 0; i < L; ++i) pos[i] = i;
  if (permute) std::shuffle(pos.begin(), pos.end(), g);
  DitForwardArgs a;
  a.timestep = std::move(timesteps);
  a.token_tags.assign(L, 0);
  a.timestep_indices.assign(L, 0);
  a.position_ids = Tensor::zeros({L, 3}, DType::F64);
  double* P = a.position_ids.ptr<double>();
  std::uniform_int_distribution<int64_t> pick_t(0, T - 1);
  for (int64_t i = 0; i < L; ++i) {
    const int64_t r = pos[i];
    if (i < Nt) {
      a.text_indices.push_back(r);
      a.token_tags[r] = (i >= 2 && i < 4) ? kDitTagVideo : kDitTagText;
      P[r * 3] = static_cast<double>(i);
    } else if (i < Nt + Na) {
      a.audio_indices.push_back(r);
      a.token_tags[r] = kDitTagAudio;
      P[r * 3] = Nt + (i - Nt) * 0.5;  // fractional audio time coordinates
    } else {
      const int64_t v = i - Nt - Na;
      a.video_indices.push_back(r);
      a.token_tags[r] = kDitTagVideo;
      P[r * 3] = Nt + v / 6;
      P[r * 3 + 1] = (v / 3) % 2;
      P[r * 3 + 2] = v % 3;
    }
    a.timestep_indices[r] = pick_t(g);
  }
  a.hidden_states = randn({Nv, c.patch_dim()}, g);
  a.audio_hidden_states = randn({Na, c.audio_in_channels}, g);
  a.encoder_hidden_states = randn({Nt, c.text_dim}, g);
  return a;
}

// ---------------------------------------------------------------------------------------------------------------
// An independent float64 evaluation of the reference forward (diffusers transformer_minimax_h3.py) with the model
// converted to float64, as the fixtures' `*_f64` outputs are made: the sinusoid stays float32 (get_timestep_embedding
// computes it in float32), the rotary angles multiply f32-cast positions by the f32 inv_freq in float64.

using Vec = std::vector<double>;

struct Mat {
  int64_t rows = 0, cols = 0;
  Vec v;
  double* row(int64_t r) { return v.data() + r * cols; }
  const double* row(int64_t r) const { return v.data() + r * cols; }
};

inline Mat to_mat(const Tensor& t) {
  Mat m;
  m.rows = t.ndim() == 1 ? 1 : t.dim(0);
  m.cols = t.dim(-1);
  m.v.resize(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) m.v[i] = t.at(i);
  return m;
}

// What the float64 reference's core runs: the checkpoint blocks `blocks` (ascending; empty: all) and, for token
// reduction, the reduced rows — each one the pair of rows (a, b) it pools (a == b: a row alone) at the mean of their
// positions — over the blocks b with begin <= b < end.
struct ReferenceCore {
  std::vector<int64_t> blocks;
  std::vector<std::pair<int64_t, int64_t>> pairs = {};  // empty: no token reduction
  int64_t begin = 0, end = 0;
};

class Reference64 {
 public:
  Reference64(const std::string& dir, const DitConfig& c) : ck_(Checkpoint::open(dir)), c_(c) {}

  // Set: the main blocks' attention between RoPE and to_out — q, k, v [rows, heads·head_dim] after q/k RMSNorm and
  // RoPE, and to_gate_compress(h) where the checkpoint has it — instead of full SDPA (FastH3's sparse attention).
  std::function<Mat(const Mat& q, const Mat& k, const Mat& v, const Mat* gate)> main_attention;

  std::pair<Mat, Mat> forward(const DitForwardArgs& a, const ReferenceCore& core_spec = {}) {
    Mat x = embed(a);
    core(a, x, core_spec);
    return heads(a, x);
  }

  // The packed rows the blocks start from: the refined text, the projected video and audio rows (spec §5.1–§5.3).
  Mat embed(const DitForwardArgs& a) {
    const int64_t L = a.position_ids.dim(0), D = c_.hidden_size;
    Mat video = linear(to_mat(a.hidden_states), "proj_in");
    Mat audio = linear(to_mat(a.audio_hidden_states), "audio_proj_in");
    Mat text = linear(to_mat(a.encoder_hidden_states), "context_embedder");
    for (int64_t j = 0; j < c_.num_refiner_layers; ++j) {
      const std::string p = "token_refiner.refiner_blocks." + std::to_string(j);
      add(text, attention(rms(text, p + ".norm1.weight", c_.norm_eps), p, nullptr));
      add(text, ffn(rms(text, p + ".norm2.weight", c_.norm_eps), p));
    }
    text = rms(text, "token_refiner.final_norm.weight", c_.final_norm_eps);
    Mat x{L, D, Vec(L * D, 0.0)};
    scatter(text, a.text_indices, x);
    scatter(video, a.video_indices, x);
    scatter(audio, a.audio_indices, x);
    return x;
  }

  // The blocks over x (spec §5.6), as `spec` says: the pooled rows x[a]/2 + x[b]/2 enter the first block run in
  // [begin, end), and before the first run past it each member gets the update of its pooled row (a row alone: the
  // pooled row's value).
  void core(const DitForwardArgs& a, Mat& x, const ReferenceCore& spec) {
    const int64_t L = a.position_ids.dim(0), D = c_.hidden_size;
    std::vector<int64_t> blocks = spec.blocks;
    if (blocks.empty())
      for (int64_t i = 0; i < c_.num_layers; ++i) blocks.push_back(i);
    const Mat cond = time_condition(a);
    std::vector<int64_t> table_rows(L);
    for (int64_t r = 0; r < L; ++r) table_rows[r] = a.timestep_indices[r] * 3 + a.token_tags[r];
    const auto [cos, sin] = rope(a.position_ids);
    const int64_t R = static_cast<int64_t>(spec.pairs.size());
    Mat xr{R, D, Vec(R * D)}, pooled;
    std::vector<int64_t> reduced_rows(R);
    Tensor reduced_positions = Tensor::empty({std::max<int64_t>(R, 1), 3}, DType::F64);
    for (int64_t i = 0; i < R; ++i) {
      const auto [p, q] = spec.pairs[i];
      reduced_rows[i] = table_rows[p];
      for (int64_t axis = 0; axis < 3; ++axis)
        reduced_positions.ptr<double>()[i * 3 + axis] =
            (a.position_ids.at(p * 3 + axis) + a.position_ids.at(q * 3 + axis)) / 2.0;
    }
    const auto [rcos, rsin] = rope(reduced_positions);
    bool inside = false;
    auto leave = [&] {
      for (int64_t i = 0; i < R; ++i) {
        const auto [p, q] = spec.pairs[i];
        for (int64_t d = 0; d < D; ++d) {
          if (p == q) {
            x.row(p)[d] = xr.row(i)[d];
          } else {
            const double update = xr.row(i)[d] - pooled.row(i)[d];
            x.row(p)[d] += update;
            x.row(q)[d] += update;
          }
        }
      }
      inside = false;
    };
    for (int64_t b : blocks) {
      const bool reduced = R > 0 && b >= spec.begin && b < spec.end;
      if (reduced && !inside) {
        for (int64_t i = 0; i < R; ++i)
          for (int64_t d = 0; d < D; ++d)
            xr.row(i)[d] = (x.row(spec.pairs[i].first)[d] + x.row(spec.pairs[i].second)[d]) / 2.0;
        pooled = xr;
        inside = true;
      } else if (!reduced && inside) {
        leave();
      }
      if (inside)
        block(b, xr, reduced_rows, rcos, rsin, cond);
      else
        block(b, x, table_rows, cos, sin, cond);
    }
    if (inside) leave();
  }

  // norm_out and the heads over the rows x after the blocks (spec §5.8).
  std::pair<Mat, Mat> heads(const DitForwardArgs& a, const Mat& x) {
    const int64_t L = a.position_ids.dim(0), D = c_.hidden_size, T = static_cast<int64_t>(a.timestep.size());
    const Mat fo = linear(time_condition(a), "norm_out.linear");  // [T, 2D]: shift, scale
    EXPECT_EQ(fo.rows, T);
    Mat y = rms(x, "norm_out.norm.weight", c_.final_norm_eps);
    for (int64_t r = 0; r < L; ++r) {
      const double* shift = fo.row(a.timestep_indices[r]);
      const double* scale = shift + D;
      for (int64_t d = 0; d < D; ++d) y.row(r)[d] = y.row(r)[d] * (1.0 + scale[d]) + shift[d];
    }
    const Mat video_out = linear(y, "proj_out"), audio_out = linear(y, "audio_proj_out");
    return {gather(video_out, a.video_indices), gather(audio_out, a.audio_indices)};
  }

 private:
  Mat weight(const std::string& name) { return to_mat(ck_.get(name)); }

  Mat linear(const Mat& x, const std::string& prefix, bool bias = true) {
    const Mat w = weight(prefix + ".weight");
    Mat y{x.rows, w.rows, Vec(x.rows * w.rows)};
    Vec b = bias ? weight(prefix + ".bias").v : Vec(w.rows, 0.0);
    for (int64_t r = 0; r < x.rows; ++r)
      for (int64_t o = 0; o < w.rows; ++o) {
        double s = b[o];
        for (int64_t k = 0; k < x.cols; ++k) s += x.row(r)[k] * w.row(o)[k];
        y.row(r)[o] = s;
      }
    return y;
  }
  static Mat silu(Mat m) {
    for (double& v : m.v) v = v / (1.0 + std::exp(-v));
    return m;
  }
  static void rms_row(double* x, int64_t n, const double* w, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
    const double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * w[i];
  }
  Mat rms(Mat x, const std::string& w_name, double eps) {
    const Mat w = weight(w_name);
    for (int64_t r = 0; r < x.rows; ++r) rms_row(x.row(r), x.cols, w.v.data(), eps);
    return x;
  }
  static void add(Mat& x, const Mat& y) {
    for (size_t i = 0; i < x.v.size(); ++i) x.v[i] += y.v[i];
  }
  static void scatter(const Mat& src, const std::vector<int64_t>& idx, Mat& dst) {
    for (size_t i = 0; i < idx.size(); ++i) std::copy_n(src.row(i), src.cols, dst.row(idx[i]));
  }
  static Mat gather(const Mat& src, const std::vector<int64_t>& idx) {
    Mat out{static_cast<int64_t>(idx.size()), src.cols, Vec(idx.size() * src.cols)};
    for (size_t i = 0; i < idx.size(); ++i) std::copy_n(src.row(idx[i]), src.cols, out.row(i));
    return out;
  }

  // The rotary tables (cos, sin) [rows, 6F] of positions [rows, 3].
  std::pair<Mat, Mat> rope(const Tensor& position_ids) {
    const int64_t L = position_ids.dim(0), F = c_.rope_freq_dim;
    std::vector<float> inv(F);  // 1 / theta^(arange(0, 2F, 2) / 2F), all in f32
    for (int64_t k = 0; k < F; ++k)
      inv[k] = 1.0f / std::pow(static_cast<float>(c_.rope_theta), static_cast<float>(2 * k) / static_cast<float>(2 * F));
    Mat cos{L, 6 * F, Vec(L * 6 * F)};
    Mat sin = cos;
    for (int64_t r = 0; r < L; ++r)
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t k = 0; k < F; ++k) {
          const double angle = static_cast<double>(static_cast<float>(position_ids.at(r * 3 + a))) * inv[k];
          for (int64_t dup : {int64_t{0}, 3 * F}) {
            cos.row(r)[dup + a * F + k] = std::cos(angle);
            sin.row(r)[dup + a * F + k] = std::sin(angle);
          }
        }
    return {cos, sin};
  }

  // silu(time MLP(sinusoid)) of the request's timesteps [T, time_embed_dim] (the sinusoid float32, as the reference).
  Mat time_condition(const DitForwardArgs& a) {
    const Tensor emb32 = dit_timestep_sinusoid(c_, a.timestep);
    return silu(linear(silu(linear(to_mat(emb32), "time_embedder.linear_1")), "time_embedder.linear_2"));
  }

  // Block i over the rows x, row r modulated by AdaLN table row table_rows[r] (3·ti + tag) and rotated by cos/sin.
  void block(int64_t i, Mat& x, const std::vector<int64_t>& table_rows, const Mat& cos, const Mat& sin,
             const Mat& cond) {
    const int64_t D = c_.hidden_size;
    const std::string p = "transformer_blocks." + std::to_string(i);
    const Mat m = linear(cond, p + ".adaln_proj.linear");  // [T, 18D] → rows 3·ti + tag of 6·D
    auto param = [&](int64_t row, int k) { return m.v.data() + row * 6 * D + k * D; };
    Mat n = rms(x, p + ".norm1.weight", c_.norm_eps);
    for (int64_t r = 0; r < x.rows; ++r)
      for (int64_t d = 0; d < D; ++d)
        n.row(r)[d] = n.row(r)[d] * (1.0 + param(table_rows[r], 1)[d]) + param(table_rows[r], 0)[d];
    const std::pair<const Mat*, const Mat*> tables{&cos, &sin};
    const Mat o = attention(n, p, &tables);
    for (int64_t r = 0; r < x.rows; ++r)
      for (int64_t d = 0; d < D; ++d) x.row(r)[d] += param(table_rows[r], 2)[d] * o.row(r)[d];
    n = rms(x, p + ".norm2.weight", c_.norm_eps);
    for (int64_t r = 0; r < x.rows; ++r)
      for (int64_t d = 0; d < D; ++d)
        n.row(r)[d] = n.row(r)[d] * (1.0 + param(table_rows[r], 4)[d]) + param(table_rows[r], 3)[d];
    const Mat f = ffn(n, p);
    for (int64_t r = 0; r < x.rows; ++r)
      for (int64_t d = 0; d < D; ++d) x.row(r)[d] += param(table_rows[r], 5)[d] * f.row(r)[d];
  }

  // to_q/to_k/to_v → per-head RMSNorm → (RoPE) → SDPA → to_out.0
  Mat attention(const Mat& h, const std::string& p, const std::pair<const Mat*, const Mat*>* rope_tables) {
    const int64_t R = h.rows, H = c_.num_attention_heads, Hd = c_.attention_head_dim, rot = 6 * c_.rope_freq_dim;
    Mat q = linear(h, p + ".attn.to_q", false), k = linear(h, p + ".attn.to_k", false);
    const Mat v = linear(h, p + ".attn.to_v", false);
    const Mat wq = weight(p + ".attn.norm_q.weight"), wk = weight(p + ".attn.norm_k.weight");
    for (int64_t r = 0; r < R; ++r)
      for (int64_t hh = 0; hh < H; ++hh) {
        for (auto [m, w] : {std::pair{&q, &wq}, std::pair{&k, &wk}}) {
          double* x = m->row(r) + hh * Hd;
          rms_row(x, Hd, w->v.data(), c_.qk_norm_eps);
          if (!rope_tables) continue;
          const Mat& cos_table = *rope_tables->first;
          const Mat& sin_table = *rope_tables->second;
          Vec y(x, x + Hd);
          const int64_t half = rot / 2;
          for (int64_t j = 0; j < rot; ++j) {
            const double rotated = j < half ? -x[j + half] : x[j - half];
            y[j] = x[j] * cos_table.row(r)[j] + rotated * sin_table.row(r)[j];
          }
          std::copy(y.begin(), y.end(), x);
        }
      }
    const std::string gate_name = p + ".attn.to_gate_compress";
    if (rope_tables && main_attention) {
      const Mat gate = ck_.has(gate_name + ".weight") ? linear(h, gate_name, false) : Mat{};
      return linear(main_attention(q, k, v, gate.rows ? &gate : nullptr), p + ".attn.to_out.0", false);
    }
    Mat o{R, H * Hd, Vec(R * H * Hd, 0.0)};
    const double scale = 1.0 / std::sqrt(static_cast<double>(Hd));
    for (int64_t hh = 0; hh < H; ++hh)
      for (int64_t i = 0; i < R; ++i) {
        Vec s(R);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < R; ++j) {
          double d = 0;
          for (int64_t e = 0; e < Hd; ++e) d += q.row(i)[hh * Hd + e] * k.row(j)[hh * Hd + e];
          s[j] = d * scale;
          mx = std::max(mx, s[j]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j < R; ++j)
          for (int64_t e = 0; e < Hd; ++e) o.row(i)[hh * Hd + e] += s[j] / sum * v.row(j)[hh * Hd + e];
      }
    return linear(o, p + ".attn.to_out.0", false);
  }

  // FeedForward(activation "swiglu"): proj → [value | gate] → value · silu(gate) → net.2
  Mat ffn(const Mat& h, const std::string& p) {
    const Mat u = linear(h, p + ".ff.net.0.proj", false);
    const int64_t F = c_.ffn_dim;
    Mat a{h.rows, F, Vec(h.rows * F)};
    for (int64_t r = 0; r < h.rows; ++r)
      for (int64_t i = 0; i < F; ++i) {
        const double value = u.row(r)[i], gate = u.row(r)[F + i];
        a.row(r)[i] = value * gate / (1.0 + std::exp(-gate));
      }
    return linear(a, p + ".ff.net.2", false);
  }

  Checkpoint ck_;
  DitConfig c_;
};

inline Tensor mat_tensor(const Mat& m) {
  Tensor t = Tensor::empty({m.rows, m.cols}, DType::F64);
  std::copy(m.v.begin(), m.v.end(), t.ptr<double>());
  return t;
}

inline bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Both modalities' outputs bit for bit.
inline bool same_output(const DitOutput& a, const DitOutput& b) {
  return bit_equal(a.sample, b.sample) && bit_equal(a.audio_sample, b.audio_sample);
}

// The packed layout of a forward case, for begin_request.
inline DitLayout layout_of(const DitForwardArgs& a) {
  return {a.token_tags, a.position_ids, a.video_indices, a.audio_indices, a.text_indices};
}

// Rewrites the tensors of a diffusers-layout folder written by write_diffusers_model.
inline void rewrite_checkpoint(const std::string& dir, const std::function<void(const std::string&, Tensor&)>& edit) {
  const std::string file = dir + "/diffusion_pytorch_model.safetensors";
  std::vector<NamedTensor> tensors;
  {
    const Checkpoint ck = Checkpoint::open(dir);
    for (const std::string& name : ck.names()) {
      Tensor t = ck.get(name).to_f32();
      edit(name, t);
      tensors.push_back({name, t});
    }
  }
  write_safetensors(file, tensors);
}

// Gates the test controls: every block's AdaLN projection weight zero, so its table is its bias; the bias's gate
// entries (gate_msa, gate_mlp of every modality) ±gates[b] with random signs, so that block b's gate score (the mean
// |gate|) is exactly gates[b].
inline void control_gates(const std::string& dir, const DitConfig& c, const std::vector<float>& gates) {
  std::mt19937 g(5);
  const int64_t D = c.hidden_size;
  rewrite_checkpoint(dir, [&](const std::string& name, Tensor& t) {
    for (int64_t b = 0; b < c.num_layers; ++b) {
      const std::string p = "transformer_blocks." + std::to_string(b) + ".adaln_proj.linear.";
      if (name == p + "weight") std::fill_n(t.ptr<float>(), t.numel(), 0.f);
      if (name != p + "bias") continue;
      for (int64_t m = 0; m < kDitModalities; ++m)
        for (int gate : {kGateMsa, kGateMlp})
          for (int64_t d = 0; d < D; ++d)
            t.ptr<float>()[(m * kAdaLnParams + gate) * D + d] = (g() % 2 ? 1.f : -1.f) * gates[b];
    }
  });
}

// Adds transformer_blocks.{i}.attn.to_gate_compress.weight [inner, hidden] to every block: random values
// (n / sqrt(hidden)), or zeros.
inline void add_gates(const std::string& dir, const DitConfig& c, bool zero) {
  const std::string file = dir + "/diffusion_pytorch_model.safetensors";
  std::vector<NamedTensor> tensors;
  {
    const Checkpoint ck = Checkpoint::open(dir);
    for (const std::string& name : ck.names()) tensors.push_back({name, ck.get(name).to_f32()});
  }
  std::mt19937 g(77);
  std::normal_distribution<float> n(0.f, 1.f);
  for (int64_t b = 0; b < c.num_layers; ++b) {
    Tensor w = Tensor::zeros({c.inner_dim(), c.hidden_size}, DType::F32);
    if (!zero)
      for (int64_t i = 0; i < w.numel(); ++i)
        w.ptr<float>()[i] = n(g) / std::sqrt(static_cast<float>(c.hidden_size));
    tensors.push_back({dit_gate_name(b), w});
  }
  write_safetensors(file, tensors);
}

// Whether the files in `dir` can be opened with O_DIRECT (tmpfs cannot; probed on its first file): block streaming's
// direct_io tests fall back to the page cache there, and say so.
inline bool direct_io_supported(const std::string& dir) {
  int fd = -1;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) {
      fd = ::open(e.path().c_str(), O_RDONLY | O_DIRECT);
      break;
    }
  if (fd >= 0) ::close(fd);
  if (fd < 0) std::printf("  (%s does not support O_DIRECT: the direct_io cases read through the page cache)\n", dir.c_str());
  return fd >= 0;
}

// A scratch folder per test, removed afterwards.
class DitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(::testing::TempDir()) / (std::string("h3_dit_") + info->name() + "_" +
                                              std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

}  // namespace h3::dit_test

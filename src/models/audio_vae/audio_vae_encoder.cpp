#include "models/audio_vae/audio_vae_encoder.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae_blocks.h"
#include "models/random_weights.h"
#include "util/cancel.h"
#include "util/error.h"
#include "util/log.h"

namespace h3 {

namespace {

// Fixed by the reference's modules (MiniMaxH3AudioResidualUnit, MiniMaxH3AudioEncoderBlock), not by the config:
// three residual units per encoder block at these dilations. Kernel sizes come from the weights.
constexpr int64_t kUnitDilations[] = {1, 3, 9};
constexpr float kLayerNormEps = 1e-5f;  // nn.LayerNorm's default, every pre_block norm

std::string at(const std::string& prefix, int64_t i) { return prefix + "." + std::to_string(i); }

struct Conv {
  Tensor w;  // [Cout, Cin, k], weight norm folded
  Tensor b;  // [Cout]
  int64_t stride = 1, padding = 0, dilation = 1;
};

struct ResidualUnit {
  Tensor alpha_in, alpha_mid;  // Snake before the dilated k7 conv and before the k1 conv
  Conv dilated, pointwise;
};

struct EncoderBlock {
  std::vector<ResidualUnit> units;
  Tensor alpha;  // Snake before the strided conv
  Conv down;     // C → 2C, kernel 2s, stride s, padding ⌈s/2⌉
};

struct Linear {
  Tensor w, b;
};

struct Norm {
  Tensor w, b;
};

// The zero padding of an encoder block's strided conv (kernel 2s, stride s): ⌈s/2⌉, as MiniMaxH3AudioEncoderBlock
// builds it.
int64_t down_padding(int64_t stride) { return (stride + 1) / 2; }

// The encoder's tensors: the manifest's full list less the decoder's.
std::vector<TensorSpec> encoder_manifest(const AudioVaeConfig& c) {
  std::set<std::string> decoder;
  for (const TensorSpec& s : audio_vae_manifest(c, /*with_encoder=*/false)) decoder.insert(s.name);
  std::vector<TensorSpec> out;
  for (const TensorSpec& s : audio_vae_manifest(c, /*with_encoder=*/true))
    if (!decoder.count(s.name)) out.push_back(s);
  return out;
}

bool evaluated(const std::string& name) { return !name.starts_with("logs_proj."); }

// Length of every trunk stage for a padded input of `samples`: the input, each block's output, the latents.
std::vector<int64_t> trunk_lengths(const AudioVaeConfig& c, int64_t samples) {
  std::vector<int64_t> len{samples};
  for (int64_t s : c.encoder_rates)
    len.push_back(conv1d_output_length(len.back(), 2 * s, s, down_padding(s), 1));
  return len;
}

int64_t padded_length(const AudioVaeConfig& c, int64_t samples) {
  const int64_t hop = c.hop_length();
  return (samples + hop - 1) / hop * hop;
}

}  // namespace

struct AudioVaeEncoder::Weights {
  Conv conv_in;
  std::vector<EncoderBlock> blocks;
  Tensor alpha_out;
  Conv conv_out;
  Norm norm1, norm2, norm3, mlp_norm;
  Linear qkv, attn_proj, proj, w0, w1, w2;
  Conv mean_proj;
};

namespace {

// Reads the encoder tensors of one checkpoint, each checked against the manifest, and uploads them as F32.
class WeightLoader : public AudioVaeTensorReader {
 public:
  WeightLoader(Backend& be, const AudioVaeConfig& config, const std::string& weights)
      : AudioVaeTensorReader(be, encoder_manifest(config), weights, "audio VAE encoder") {}

  // A weight-normed Conv1d with bias; padding (k − 1)·d / 2 keeps the length at stride 1 (every trunk conv but the
  // strided ones, whose padding the caller gives).
  Conv conv(const std::string& p, int64_t stride, int64_t dilation, int64_t padding = -1) {
    Conv c;
    c.w = device(fold_weight_norm(host(p + ".weight_g"), host(p + ".weight_v")));
    c.b = tensor(p + ".bias");
    c.stride = stride;
    c.dilation = dilation;
    c.padding = padding >= 0 ? padding : (c.w.dim(2) - 1) * dilation / 2;
    return c;
  }
  Linear linear(const std::string& p) { return {tensor(p + ".weight"), tensor(p + ".bias")}; }
  Norm norm(const std::string& p) { return {tensor(p + ".weight"), tensor(p + ".bias")}; }
  // A Snake's alpha, stored [1, C, 1], uploaded as [C].
  Tensor alpha(const std::string& p) {
    const Tensor a = host(p + ".alpha");
    return device(a.reshape({a.numel()}));
  }
  // The fused q|k|v projection and its bias [q_bias ; zero_k_bias ; v_bias], as the reference's processor
  // concatenates them (the stored key bias, zeros in every checkpoint).
  Linear qkv(const std::string& p) {
    std::vector<float> bias;
    for (const char* part : {".q_bias", ".zero_k_bias", ".v_bias"}) {
      const Tensor t = host(p + part);
      bias.insert(bias.end(), t.ptr<float>(), t.ptr<float>() + t.numel());
    }
    return {tensor(p + ".qkv.weight"),
            device(Tensor::from_f32({static_cast<int64_t>(bias.size())}, bias))};
  }
  // mean_proj: a plain Conv1d k1.
  Conv plain_conv(const std::string& p) {
    Conv c;
    c.w = tensor(p + ".weight");
    c.b = tensor(p + ".bias");
    return c;
  }

};

// The same tensors drawn at random on the backend (models/random_weights.h), shaped by the encoder's manifest, as
// AudioVaeDecoder::random draws the decoder's: folded weight-norm weights whose rows (axis 0) have norms near
// kRandomRowNorm, plain weights N(0, 1/√fan_in), small biases, LayerNorm weights N(1, kRandomNormStd), Snake alphas
// N(1, kRandomAlphaStd) (stored raw, around 1, as write_random_audio_vae draws them), the key bias zero.
class RandomSource {
 public:
  static constexpr float kRandomRowNorm = 0.75f;
  static constexpr float kRandomAlphaStd = 0.3f;

  RandomSource(Backend& be, const AudioVaeConfig& config, uint64_t seed) : be_(be), rw_(be, seed) {
    for (const TensorSpec& s : encoder_manifest(config)) shapes_[s.name] = s.shape;
  }

  Conv conv(const std::string& p, int64_t stride, int64_t dilation, int64_t padding = -1) {
    const Shape& s = shape(p + ".weight_v");
    Conv c;
    c.w = rw_.matrix(p + ".weight", s, DType::F32, shape_numel(s) / s.at(0), kRandomRowNorm);
    c.b = rw_.bias(p + ".bias", shape(p + ".bias"), DType::F32);
    c.stride = stride;
    c.dilation = dilation;
    c.padding = padding >= 0 ? padding : (s.at(2) - 1) * dilation / 2;
    return c;
  }
  Linear linear(const std::string& p) {
    return {rw_.matrix(p + ".weight", shape(p + ".weight"), DType::F32),
            rw_.bias(p + ".bias", shape(p + ".bias"), DType::F32)};
  }
  Norm norm(const std::string& p) {
    return {rw_.norm(p + ".weight", shape(p + ".weight"), DType::F32),
            rw_.bias(p + ".bias", shape(p + ".bias"), DType::F32)};
  }
  Tensor alpha(const std::string& p) {
    const Shape& s = shape(p + ".alpha");  // [1, C, 1]
    return rw_.normal(p + ".alpha", {shape_numel(s)}, DType::F32, 1.f, kRandomAlphaStd);
  }
  // [q_bias ; zero key bias ; v_bias], as WeightLoader::qkv concatenates them.
  Linear qkv(const std::string& p) {
    const int64_t d = shape(p + ".q_bias").at(0);
    const Tensor q = be_.download(rw_.bias(p + ".q_bias", {d}, DType::F32));
    const Tensor v = be_.download(rw_.bias(p + ".v_bias", {d}, DType::F32));
    std::vector<float> bias(static_cast<size_t>(3 * d), 0.f);
    std::copy_n(q.ptr<float>(), d, bias.begin());
    std::copy_n(v.ptr<float>(), d, bias.begin() + 2 * d);
    return {rw_.matrix(p + ".qkv.weight", shape(p + ".qkv.weight"), DType::F32),
            be_.upload(Tensor::from_f32({3 * d}, bias), DType::F32)};
  }
  Conv plain_conv(const std::string& p) {
    const Shape& s = shape(p + ".weight");
    Conv c;
    c.w = rw_.matrix(p + ".weight", s, DType::F32, shape_numel(s) / s.at(0));
    c.b = rw_.bias(p + ".bias", shape(p + ".bias"), DType::F32);
    return c;
  }

 private:
  const Shape& shape(const std::string& name) const {
    auto it = shapes_.find(name);
    H3_CHECK(it != shapes_.end(), "audio VAE random weights: '", name, "' is not an encoder tensor of this config");
    return it->second;
  }

  Backend& be_;
  RandomWeights rw_;
  std::map<std::string, Shape> shapes_;
};

// The encoder's weights from a source (WeightLoader or RandomSource).
template <class Source>
std::unique_ptr<AudioVaeEncoder::Weights> build_weights(const AudioVaeConfig& c, Source& ld) {
  auto w = std::make_unique<AudioVaeEncoder::Weights>();
  w->conv_in = ld.conv("encoder.block.0", 1, 1);
  const int64_t n = static_cast<int64_t>(c.encoder_rates.size());
  for (int64_t b = 0; b < n; ++b) {
    const std::string p = at("encoder.block", b + 1) + ".block";
    EncoderBlock blk;
    for (int64_t u = 0; u < static_cast<int64_t>(std::size(kUnitDilations)); ++u) {
      const std::string q = at(p, u) + ".block";
      blk.units.push_back({ld.alpha(q + ".0"), ld.alpha(q + ".2"), ld.conv(q + ".1", 1, kUnitDilations[u]),
                           ld.conv(q + ".3", 1, 1)});
    }
    const int64_t s = c.encoder_rates[b];
    blk.alpha = ld.alpha(p + ".3");
    blk.down = ld.conv(p + ".4", s, 1, down_padding(s));
    w->blocks.push_back(std::move(blk));
  }
  w->alpha_out = ld.alpha(at("encoder.block", n + 1));
  w->conv_out = ld.conv(at("encoder.block", n + 2), 1, 1);
  w->norm1 = ld.norm("pre_block.norm1");
  w->norm2 = ld.norm("pre_block.norm2");
  w->norm3 = ld.norm("pre_block.norm3");
  w->mlp_norm = ld.norm("pre_block.mlp.norm");
  w->qkv = ld.qkv("pre_block.attn");
  w->attn_proj = ld.linear("pre_block.attn.proj");
  w->proj = ld.linear("pre_block.proj");
  w->w0 = ld.linear("pre_block.mlp.w0");
  w->w1 = ld.linear("pre_block.mlp.w1");
  w->w2 = ld.linear("pre_block.mlp.w2");
  w->mean_proj = ld.plain_conv("mean_proj");
  return w;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

void check_audio_waveform(const AudioVaeConfig& config, const Tensor& waveform) {
  H3_CHECK(waveform.device() == Device::CPU, "the audio waveform must be a host tensor");
  H3_CHECK(dtype_is_float(waveform.dtype()), "the audio waveform must be a float tensor, got ", waveform.str());
  H3_CHECK(waveform.ndim() == 2, "the audio waveform must be [channels (1 or 2), samples], got ", waveform.str());
  H3_CHECK(waveform.dim(0) == 1 || waveform.dim(0) == 2,
           "the audio waveform must have 1 (mono) or 2 (stereo) channels, got ", waveform.dim(0));
  H3_CHECK(waveform.dim(1) >= 1, "the audio waveform is empty: it needs at least one sample per channel");
  const int64_t max_samples = kMaxReferenceAudioSeconds * config.sampling_rate;
  H3_CHECK(waveform.dim(1) <= max_samples, "reference audio can be at most ", kMaxReferenceAudioSeconds, " s long (",
           max_samples, " samples at ", config.sampling_rate, " Hz), got ", waveform.dim(1), " samples (",
           static_cast<double>(waveform.dim(1)) / static_cast<double>(config.sampling_rate), " s)");
  // The first non-finite sample, if any (a float32 waveform scanned directly: this runs before every encode).
  int64_t bad = -1;
  if (waveform.dtype() == DType::F32) {
    const float* p = waveform.ptr<float>();
    const int64_t n = waveform.numel();
    uint32_t non_finite = 0;  // an all-ones exponent: inf or NaN (a branch-free scan the compiler vectorizes)
    for (int64_t i = 0; i < n; ++i) non_finite |= (std::bit_cast<uint32_t>(p[i]) & 0x7f800000u) == 0x7f800000u;
    if (non_finite) bad = std::find_if(p, p + n, [](float v) { return !std::isfinite(v); }) - p;
  } else {
    for (int64_t i = 0; i < waveform.numel() && bad < 0; ++i)
      if (!std::isfinite(waveform.at(i))) bad = i;
  }
  H3_CHECK(bad < 0, "the audio waveform must hold finite samples; sample ", bad % waveform.dim(1), " of channel ",
           bad / waveform.dim(1), " is ", bad < 0 ? 0.0 : waveform.at(bad));
}

namespace {

// The trunk's convolution weights [Cout, Cin, k] → [Cout, k, Cin], for channels-last convolutions (mean_proj, on
// the channels-first latents, keeps its own).
void trunk_weights_to_channels_last(Backend& be, AudioVaeEncoder::Weights& w);

}  // namespace

AudioVaeEncoder::AudioVaeEncoder(Backend& backend, AudioVaeConfig config, std::unique_ptr<Weights> weights)
    : be_(backend),
      config_(std::move(config)),
      w_(std::move(weights)),
      channels_last_(backend.prefers_channels_last_conv1d()) {
  if (channels_last_) trunk_weights_to_channels_last(be_, *w_);
}
AudioVaeEncoder::~AudioVaeEncoder() = default;

const AudioVaeConfig& AudioVaeEncoder::config() const { return config_; }

std::unique_ptr<AudioVaeEncoder> AudioVaeEncoder::load(Backend& backend, const Component& audio_vae) {
  AudioVaeConfig c = load_audio_vae_config(audio_vae);
  WeightLoader ld(backend, c, audio_vae.weights);
  auto w = build_weights(c, ld);
  log_debug("audio VAE encoder: ", c.encoder_rates.size(), " blocks, hop ", c.hop_length(), ", loaded from ",
            audio_vae.weights);
  return std::unique_ptr<AudioVaeEncoder>(new AudioVaeEncoder(backend, std::move(c), std::move(w)));
}

std::unique_ptr<AudioVaeEncoder> AudioVaeEncoder::random(Backend& backend, AudioVaeConfig config, uint64_t seed) {
  if (config.latents_mean.empty()) config.latents_mean.assign(config.latent_channels, 0.0);
  if (config.latents_std.empty()) config.latents_std.assign(config.latent_channels, 1.0);
  config.validate("random audio VAE config");
  RandomSource src(backend, config, seed);
  auto w = build_weights(config, src);
  return std::unique_ptr<AudioVaeEncoder>(new AudioVaeEncoder(backend, std::move(config), std::move(w)));
}

uint64_t AudioVaeEncoder::weight_bytes(const AudioVaeConfig& config) {
  uint64_t n = 0;
  for (const TensorSpec& s : encoder_manifest(config))
    if (evaluated(s.name) && !s.name.ends_with(".weight_g")) n += static_cast<uint64_t>(shape_numel(s.shape));
  return n * sizeof(float);
}

uint64_t AudioVaeEncoder::working_bytes(const AudioVaeConfig& c, int64_t channels, int64_t samples) {
  const std::vector<int64_t> len = trunk_lengths(c, padded_length(c, samples));
  const int64_t A = len.back(), L = c.latent_dim, Z = c.latent_channels;
  // Floats per channel alive at each point of the forward (see trunk() and pre_block()).
  int64_t peak = len[0] + 2 * c.encoder_dim * len[0];  // the waveform, block.0's output and its Snake
  int64_t ch = c.encoder_dim;
  for (size_t b = 0; b < c.encoder_rates.size(); ++b) {
    peak = std::max(peak, 3 * ch * len[b]);  // a residual unit: x, Snake(x), the dilated conv (then x, h, r)
    // The strided conv's input, its output and (but after the last block) the output's Snake.
    const bool last = b + 1 == c.encoder_rates.size();
    peak = std::max(peak, ch * len[b] + (last ? 2 : 4) * ch * len[b + 1]);
    ch *= 2;
  }
  peak = std::max(peak, ch * A + L * A);  // block 7: the last level and the trunk's output
  peak = std::max(peak, 2 * L * A);       // the transpose to rows
  peak = std::max(peak, 5 * L * A + Z * A);  // rows, LayerNorm 1, qkv (3L) and the projected branch
  peak = std::max(peak, L * A + 8 * Z * A);  // rows, h, the MLP's input, w0's output, its GELU and w1's output
  return static_cast<uint64_t>(peak) * static_cast<uint64_t>(channels) * sizeof(float);
}

int64_t AudioVaeEncoder::latents_for(int64_t samples) const {
  return trunk_lengths(config_, padded_length(config_, samples)).back();
}

// ---------------------------------------------------------------------------------------------------------------
// Forward

namespace {

Tensor run_conv(Backend& be, const Conv& c, const Tensor& x) {
  const int64_t T = conv1d_output_length(x.dim(2), c.w.dim(2), c.stride, c.padding, c.dilation);
  Tensor y = be.empty({x.dim(0), c.w.dim(0), T}, DType::F32);
  be.conv1d(x, c.w, &c.b, c.stride, c.padding, c.dilation, y);
  return y;
}

// y = conv(x) (+ residual), act = Snake(y, alpha) (conv1d_snake); act may be y or x (see backend.h).
void conv_snake(Backend& be, const Conv& c, const Tensor& x, const Tensor* residual, const Tensor& alpha, Tensor& y,
                Tensor& act) {
  be.conv1d_snake(x, c.w, &c.b, c.stride, c.padding, c.dilation, residual, alpha, y, act);
}

Tensor conv_output(Backend& be, const Conv& c, const Tensor& x) {
  return be.empty({x.dim(0), c.w.dim(0), conv1d_output_length(x.dim(2), c.w.dim(2), c.stride, c.padding, c.dilation)},
                  DType::F32);
}

// The channels-last forms: x [B, T, Cin], c.w [Cout, k, Cin] → [B, Tout, Cout].
void conv_snake_nlc(Backend& be, const Conv& c, const Tensor& x, const Tensor* residual, const Tensor& alpha,
                    Tensor& y, Tensor& act) {
  be.conv1d_snake_nlc(x, c.w, &c.b, c.stride, c.padding, c.dilation, residual, alpha, y, act);
}

Tensor conv_output_nlc(Backend& be, const Conv& c, const Tensor& x) {
  return be.empty({x.dim(0), conv1d_output_length(x.dim(1), c.w.dim(1), c.stride, c.padding, c.dilation), c.w.dim(0)},
                  DType::F32);
}

Tensor rows_like(Backend& be, int64_t rows, int64_t width) { return be.empty({rows, width}, DType::F32); }

Tensor run_linear(Backend& be, const Linear& l, const Tensor& x) {
  Tensor y = rows_like(be, x.numel() / x.dim(-1), l.w.dim(0));
  be.linear(x, l.w, &l.b, y);
  return y;
}

Tensor run_norm(Backend& be, const Norm& n, const Tensor& x) {
  Tensor y = be.empty(x.shape(), DType::F32);
  be.layer_norm(x, &n.w, &n.b, kLayerNormEps, y);
  return y;
}

}  // namespace

namespace {

void trunk_weights_to_channels_last(Backend& be, AudioVaeEncoder::Weights& w) {
  auto swap = [&](Conv& c) {
    Tensor t = be.empty({c.w.dim(0), c.w.dim(2), c.w.dim(1)}, DType::F32);
    be.transpose_last_two(c.w, t);
    c.w = std::move(t);
  };
  swap(w.conv_in);
  for (EncoderBlock& blk : w.blocks) {
    for (ResidualUnit& u : blk.units) {
      swap(u.dilated);
      swap(u.pointwise);
    }
    swap(blk.down);
  }
  swap(w.conv_out);
}

}  // namespace

// padded [B, 1, N'] → the trunk's output [B, latent_dim, A] (encoder.block). Takes the input by value to release it
// after the first convolution. Every Snake follows a convolution, so each runs as that convolution's conv1d_snake:
//   x = block.0(padded), a = Snake_u0(x);
//   per residual unit: h = Snake_mid(dilated(a)) in place; r = pointwise(h) + x, and a = Snake of r for the next
//   unit (written over h) — or, after a block's last unit, r = Snake_block(r) in place (x is not needed again);
//   per block: x = down(a), a = Snake of x for the next block's first unit — or, after the last block,
//   x = Snake_out(x) in place.
// At most three [B, C, L] tensors of a level live at once (x, a, h; then x, h, r), as the unfused chain had.
// channels_last_: the same chain on [B, L, C] tensors (conv1d_snake_nlc; the padded input [B, N, 1]); the output is
// then [B, A, latent_dim].
Tensor AudioVaeEncoder::trunk(Tensor padded) {
  const bool nlc = channels_last_;
  const auto out_of = [&](const Conv& c, const Tensor& x) {
    return nlc ? conv_output_nlc(be_, c, x) : conv_output(be_, c, x);
  };
  const auto conv_act = [&](const Conv& c, const Tensor& x, const Tensor* residual, const Tensor& alpha, Tensor& y,
                            Tensor& act) {
    if (nlc)
      conv_snake_nlc(be_, c, x, residual, alpha, y, act);
    else
      conv_snake(be_, c, x, residual, alpha, y, act);
  };
  const auto& blocks = w_->blocks;
  Tensor x = out_of(w_->conv_in, padded), a = be_.empty(x.shape(), DType::F32);
  conv_act(w_->conv_in, padded, nullptr, blocks.at(0).units.at(0).alpha_in, x, a);
  padded = Tensor();
  for (size_t b = 0; b < blocks.size(); ++b) {
    const EncoderBlock& blk = blocks[b];
    for (size_t u = 0; u < blk.units.size(); ++u) {
      throw_if_cancelled();  // between residual units
      const ResidualUnit& unit = blk.units[u];
      const bool last = u + 1 == blk.units.size();
      Tensor h = out_of(unit.dilated, a);
      conv_act(unit.dilated, a, nullptr, unit.alpha_mid, h, h);
      a = Tensor();
      Tensor r = out_of(unit.pointwise, h);
      if (last) {  // r = Snake_block(x + pointwise(h)): the strided conv's input; x and h are done with
        conv_act(unit.pointwise, h, &x, blk.alpha, r, r);
        x = Tensor();
        a = std::move(r);
      } else {  // x ← x + pointwise(h) (the next shortcut), a ← its Snake, written over h
        conv_act(unit.pointwise, h, &x, blk.units[u + 1].alpha_in, r, h);
        x = std::move(r);
        a = std::move(h);
      }
    }
    const bool last_block = b + 1 == blocks.size();
    Tensor d = out_of(blk.down, a);
    if (last_block) {
      conv_act(blk.down, a, nullptr, w_->alpha_out, d, d);
      a = std::move(d);
    } else {
      Tensor next = be_.empty(d.shape(), DType::F32);
      conv_act(blk.down, a, nullptr, blocks[b + 1].units[0].alpha_in, d, next);
      x = std::move(d);
      a = std::move(next);
    }
  }
  if (!nlc) return run_conv(be_, w_->conv_out, a);
  Tensor out = out_of(w_->conv_out, a);
  be_.conv1d_nlc(a, w_->conv_out.w, &w_->conv_out.b, w_->conv_out.stride, w_->conv_out.padding,
                 w_->conv_out.dilation, out);
  return out;
}

// rows [B·A, latent_dim] → [B·A, latent_channels] (MiniMaxH3AudioAttnProjection):
//   h = proj(norm3(x)) + attn.proj(pooled causal attention(qkv(norm1(x))));  h + w2(gelu_tanh(w0(z)) · w1(z)),
//   z = mlp.norm(norm2(h)).
Tensor AudioVaeEncoder::pre_block(const Tensor& rows, int64_t channels) {
  const int64_t R = rows.dim(0), heads = config_.num_attention_heads;
  Tensor h = run_linear(be_, w_->proj, run_norm(be_, w_->norm3, rows));
  {
    Tensor qkv = run_linear(be_, w_->qkv, run_norm(be_, w_->norm1, rows));
    Tensor pooled = rows_like(be_, R, config_.latent_channels);
    const int64_t head_dim = config_.latent_dim / heads;
    // dispatch_attention_fn's default scale, 1/√head_dim, rounded to float32 once.
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    be_.pooled_causal_attention(qkv, channels, heads, scale, pooled);
    qkv = Tensor();
    be_.residual_add(h, run_linear(be_, w_->attn_proj, pooled), nullptr);
  }
  Tensor z = run_norm(be_, w_->mlp_norm, run_norm(be_, w_->norm2, h));
  Tensor gate = run_linear(be_, w_->w0, z);
  Tensor act = be_.empty(gate.shape(), DType::F32);
  be_.gelu(gate, /*tanh_approx=*/true, act);
  be_.multiply(act, run_linear(be_, w_->w1, z));
  be_.residual_add(h, run_linear(be_, w_->w2, act), nullptr);
  return h;
}

namespace {

// [C, S] (checked) → [B, 1, N] float32 on the host: channel b of the batch is channel src_channel[b] of the
// waveform, right-padded with zeros to N samples (AutoencoderKLMiniMaxH3Audio.encode's padding to the hop).
Tensor padded_batch(const Tensor& waveform, const std::vector<int64_t>& src_channel, int64_t N) {
  const int64_t S = waveform.dim(1), B = static_cast<int64_t>(src_channel.size());
  bool identity = waveform.dtype() == DType::F32 && S == N && B == waveform.dim(0);
  for (int64_t b = 0; b < B; ++b) identity = identity && src_channel[b] == b;
  if (identity) return waveform.reshape({B, 1, N});  // already the batch: no copy
  const Tensor src = waveform.dtype() == DType::F32 ? waveform : waveform.to(DType::F32);
  Tensor padded = Tensor::empty({B, 1, N}, DType::F32);
  for (int64_t b = 0; b < B; ++b) {
    float* dst = padded.ptr<float>() + b * N;
    std::copy_n(src.ptr<float>() + src_channel[b] * S, S, dst);
    std::fill(dst + S, dst + N, 0.f);
  }
  return padded;
}

}  // namespace

// padded [B, 1, N] (host, float32, N a multiple of the hop) → the posterior mean [B, Z, A] (host).
Tensor AudioVaeEncoder::encode_padded(const Tensor& padded) {
  const int64_t B = padded.dim(0), N = padded.dim(2);
  Tensor rows;
  if (channels_last_) {  // [B, N, 1] in, [B, A, L] out: the rows already
    rows = trunk(be_.upload(padded, DType::F32).reshape({B, N, 1}));
  } else {
    const Tensor h = trunk(be_.upload(padded, DType::F32));  // [B, L, A]
    rows = be_.empty({B, h.dim(2), h.dim(1)}, DType::F32);
    be_.transpose_last_two(h, rows);
  }
  const int64_t A = rows.dim(1), Z = config_.latent_channels;
  const Tensor z = pre_block(rows.reshape({B * A, config_.latent_dim}), B).reshape({B, A, Z});
  rows = Tensor();
  Tensor zc = be_.empty({B, Z, A}, DType::F32);
  be_.transpose_last_two(z, zc);
  return be_.download(run_conv(be_, w_->mean_proj, zc));
}

Tensor AudioVaeEncoder::encode(const Tensor& waveform) {
  check_audio_waveform(config_, waveform);
  // Channels as batch items.
  std::vector<int64_t> channels(static_cast<size_t>(waveform.dim(0)));
  for (size_t c = 0; c < channels.size(); ++c) channels[c] = static_cast<int64_t>(c);
  return encode_padded(padded_batch(waveform, channels, padded_length(config_, waveform.dim(1))));
}

Tensor AudioVaeEncoder::encode_reference(const Tensor& waveform) {
  check_audio_waveform(config_, waveform);
  // Mono → both channels, as the setup step's `expand(2, -1)` does; then encode's padding and batch.
  const std::vector<int64_t> channels = waveform.dim(0) == 2 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0, 0};
  const Tensor mean = encode_padded(padded_batch(waveform, channels, padded_length(config_, waveform.dim(1))));
  const int64_t Z = mean.dim(1), A = mean.dim(2);  // mean [2, Z, A]
  Tensor rows = Tensor::empty({2 * A, Z}, DType::F32);
  const float* M = mean.ptr<float>();
  float* out = rows.ptr<float>();
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t t = 0; t < A; ++t)
      for (int64_t k = 0; k < Z; ++k) {
        const float m = static_cast<float>(config_.latents_mean[k]), s = static_cast<float>(config_.latents_std[k]);
        out[(c * A + t) * Z + k] = (M[(c * Z + k) * A + t] - m) / s;
      }
  return rows;
}

}  // namespace h3

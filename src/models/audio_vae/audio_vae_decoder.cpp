#include "models/audio_vae/audio_vae_decoder.h"

#include <algorithm>
#include <map>
#include <optional>

#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae_blocks.h"
#include "models/random_weights.h"
#include "util/cancel.h"
#include "util/error.h"
#include "util/log.h"
#include "util/mapped_file.h"

namespace h3 {

// ---------------------------------------------------------------------------------------------------------------
// Weights

namespace {

struct Conv {
  Tensor w;                // [Cout, Cin, k], weight norm folded
  std::optional<Tensor> b; // [Cout]
  int64_t padding = 0, dilation = 1;
};

struct ConvTranspose {
  Tensor w;  // [Cin, Cout, k], weight norm folded
  Tensor b;  // [Cout]
  int64_t stride = 1, padding = 0;
};

struct AaSnakeBeta {
  Tensor log_alpha, log_beta;  // [C]
  Tensor up_filter, down_filter;
};

// BigVGAN AMPBlock1: for each dilation d, x += convs2(act(convs1(act(x)))) with convs1 dilated by d.
struct AmpBlock {
  std::vector<Conv> convs1, convs2;
  std::vector<AaSnakeBeta> acts;  // 2 per dilation: even → convs1, odd → convs2
};

struct Stage {
  ConvTranspose up;
  std::vector<AmpBlock> blocks;
};

std::string at(const std::string& prefix, size_t i) { return prefix + "." + std::to_string(i); }

}  // namespace

struct AudioVaeDecoder::Weights {
  Conv dec_in_proj, conv_pre, conv_post;
  std::vector<Stage> stages;
  AaSnakeBeta activation_post;
};

namespace {

// Reads the decoder tensors of one checkpoint, each checked against the manifest, and uploads them as F32.
class WeightLoader : public AudioVaeTensorReader {
 public:
  WeightLoader(Backend& be, const AudioVaeConfig& config, const std::string& weights)
      : AudioVaeTensorReader(be, audio_vae_manifest(config, /*with_encoder=*/false), weights, "audio VAE decoder") {}

  Conv conv(const std::string& p, bool bias, int64_t padding, int64_t dilation) {
    Conv c;
    c.w = device(fold_weight_norm(host(p + ".weight_g"), host(p + ".weight_v")));
    if (bias) c.b = tensor(p + ".bias");
    c.padding = padding;
    c.dilation = dilation;
    return c;
  }
  Conv plain_conv(const std::string& p) {
    Conv c;
    c.w = tensor(p + ".weight");
    c.b = tensor(p + ".bias");
    return c;
  }
  ConvTranspose conv_transpose(const std::string& p, int64_t stride, int64_t padding) {
    ConvTranspose c;
    c.w = device(fold_weight_norm(host(p + ".weight_g"), host(p + ".weight_v")));
    c.b = tensor(p + ".bias");
    c.stride = stride;
    c.padding = padding;
    return c;
  }
  AaSnakeBeta activation(const std::string& p) {
    return {tensor(p + ".act.alpha"), tensor(p + ".act.beta"), tensor(p + ".upsample.filter"),
            tensor(p + ".downsample.lowpass.filter")};
  }

};

// The same tensors drawn at random on the backend (models/random_weights.h), shaped by the manifest: folded
// weight-norm weights whose rows (axis 0) have norms near kRandomRowNorm, plain weights N(0, 1/√fan_in), small biases,
// the real anti-aliasing filters, SnakeBeta log-parameters N(0, kRandomLogParamStd).
class RandomSource {
 public:
  static constexpr float kRandomRowNorm = 0.75f;
  static constexpr float kRandomLogParamStd = 0.3f;

  RandomSource(Backend& be, const AudioVaeConfig& config, uint64_t seed) : be_(be), rw_(be, seed) {
    for (const TensorSpec& s : audio_vae_manifest(config, /*with_encoder=*/false)) shapes_[s.name] = s.shape;
    const std::vector<float> h = aa_activation_filter();
    filter_ = be.upload(Tensor::from_f32({static_cast<int64_t>(h.size())}, h), DType::F32);
  }

  Conv conv(const std::string& p, bool bias, int64_t padding, int64_t dilation) {
    Conv c;
    c.w = folded(p);
    if (bias) c.b = rw_.bias(p + ".bias", shape(p + ".bias"), DType::F32);
    c.padding = padding;
    c.dilation = dilation;
    return c;
  }
  Conv plain_conv(const std::string& p) {
    Conv c;
    c.w = rw_.matrix(p + ".weight", shape(p + ".weight"), DType::F32, per_row(shape(p + ".weight")));
    c.b = rw_.bias(p + ".bias", shape(p + ".bias"), DType::F32);
    return c;
  }
  ConvTranspose conv_transpose(const std::string& p, int64_t stride, int64_t padding) {
    ConvTranspose c;
    c.w = folded(p);
    c.b = rw_.bias(p + ".bias", shape(p + ".bias"), DType::F32);
    c.stride = stride;
    c.padding = padding;
    return c;
  }
  AaSnakeBeta activation(const std::string& p) {
    const Shape& s = shape(p + ".act.alpha");
    return {rw_.normal(p + ".act.alpha", s, DType::F32, 0.f, kRandomLogParamStd),
            rw_.normal(p + ".act.beta", s, DType::F32, 0.f, kRandomLogParamStd), filter_, filter_};
  }

 private:
  const Shape& shape(const std::string& name) const {
    auto it = shapes_.find(name);
    H3_CHECK(it != shapes_.end(), "audio VAE random weights: '", name, "' is not a decoder tensor of this config");
    return it->second;
  }
  static int64_t per_row(const Shape& s) { return shape_numel(s) / s.at(0); }
  Tensor folded(const std::string& p) {
    const Shape& s = shape(p + ".weight_v");
    return rw_.matrix(p + ".weight", s, DType::F32, per_row(s), kRandomRowNorm);
  }

  Backend& be_;
  RandomWeights rw_;
  std::map<std::string, Shape> shapes_;
  Tensor filter_;
};

// The decoder's weights from a source (WeightLoader or RandomSource).
template <class Source>
std::unique_ptr<AudioVaeDecoder::Weights> build_weights(const AudioVaeConfig& c, Source& ld) {
  auto w = std::make_unique<AudioVaeDecoder::Weights>();
  w->dec_in_proj = ld.plain_conv("dec_in_proj");
  constexpr int64_t kConvPreKernel = 7;  // conv_pre and conv_post: k7, "same" padding
  w->conv_pre = ld.conv("decoder.conv_pre", true, kConvPreKernel / 2, 1);
  const size_t nk = c.resblock_kernel_sizes.size();
  for (size_t i = 0; i < c.decoder_rates.size(); ++i) {
    Stage st;
    const int64_t rate = c.decoder_rates[i], k = c.decoder_kernel_sizes[i];
    st.up = ld.conv_transpose(at("decoder.ups", i) + ".0", rate, (k - rate) / 2);
    for (size_t j = 0; j < nk; ++j) {
      const std::string r = at("decoder.resblocks", i * nk + j);
      const int64_t kr = c.resblock_kernel_sizes[j];
      AmpBlock blk;
      const auto& dil = c.resblock_dilation_sizes[j];
      for (size_t m = 0; m < dil.size(); ++m) {
        blk.convs1.push_back(ld.conv(at(r + ".convs1", m), true, dil[m] * (kr - 1) / 2, dil[m]));
        blk.convs2.push_back(ld.conv(at(r + ".convs2", m), true, (kr - 1) / 2, 1));
      }
      for (size_t n = 0; n < 2 * dil.size(); ++n) blk.acts.push_back(ld.activation(at(r + ".activations", n)));
      st.blocks.push_back(std::move(blk));
    }
    w->stages.push_back(std::move(st));
  }
  w->activation_post = ld.activation("decoder.activation_post");
  w->conv_post = ld.conv("decoder.conv_post", false, kConvPreKernel / 2, 1);
  return w;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

Component audio_vae_component_at(const std::string& dir) {
  H3_CHECK(dir_exists(dir), dir, ": audio VAE folder not found");
  Component c;
  c.name = "audio_vae";
  c.dir = dir;
  const std::string config = join_path(dir, "config.json"), metadata = join_path(dir, "metadata.json");
  H3_CHECK(file_exists(config), dir, ": not an audio VAE folder (config.json is missing)");
  c.present = true;
  if (file_exists(metadata)) {
    c.layout = Layout::Original;
    c.config_files = {config, metadata};
    c.weights = join_path(dir, "model.safetensors");
  } else {
    c.layout = Layout::Diffusers;
    c.config_files = {config};
    c.weights = dir;
  }
  return c;
}

void check_audio_latents(const AudioVaeConfig& config, const Tensor& latents) {
  H3_CHECK(latents.device() == Device::CPU, "audio latents must be a host tensor");
  H3_CHECK(dtype_is_float(latents.dtype()), "audio latents must be a float tensor, got ", latents.str());
  H3_CHECK(latents.ndim() == 3, "audio latents must be [channels (1 or 2), ", config.latent_channels,
           ", latents], got ", latents.str());
  H3_CHECK(latents.dim(0) == 1 || latents.dim(0) == 2, "audio latents must hold 1 or 2 audio channels (dim 0), got ",
           latents.dim(0));
  H3_CHECK(latents.dim(1) == config.latent_channels, "audio latents must have ", config.latent_channels,
           " latent channels (dim 1), got ", latents.dim(1));
  H3_CHECK(latents.dim(2) >= 1, "audio latents must hold at least one latent per channel (dim 2), got 0");
}

AudioVaeDecoder::AudioVaeDecoder(Backend& backend, AudioVaeConfig config, std::unique_ptr<Weights> weights)
    : be_(backend), config_(std::move(config)), w_(std::move(weights)) {}
AudioVaeDecoder::~AudioVaeDecoder() = default;

const AudioVaeConfig& AudioVaeDecoder::config() const { return config_; }

std::unique_ptr<AudioVaeDecoder> AudioVaeDecoder::load(Backend& backend, const Component& audio_vae) {
  AudioVaeConfig c = load_audio_vae_config(audio_vae);
  WeightLoader ld(backend, c, audio_vae.weights);
  auto w = build_weights(c, ld);
  log_debug("audio VAE decoder: ", c.decoder_rates.size(), " stages, hop ", c.hop_length(), ", loaded from ",
            audio_vae.weights);
  return std::unique_ptr<AudioVaeDecoder>(new AudioVaeDecoder(backend, std::move(c), std::move(w)));
}

std::unique_ptr<AudioVaeDecoder> AudioVaeDecoder::random(Backend& backend, AudioVaeConfig config, uint64_t seed) {
  if (config.latents_mean.empty()) config.latents_mean.assign(config.latent_channels, 0.0);
  if (config.latents_std.empty()) config.latents_std.assign(config.latent_channels, 1.0);
  config.validate("random audio VAE config");
  RandomSource src(backend, config, seed);
  auto w = build_weights(config, src);
  return std::unique_ptr<AudioVaeDecoder>(new AudioVaeDecoder(backend, std::move(config), std::move(w)));
}

uint64_t AudioVaeDecoder::weight_bytes(const AudioVaeConfig& config) {
  uint64_t n = 0;
  for (const TensorSpec& s : audio_vae_manifest(config, /*with_encoder=*/false))
    if (!s.name.ends_with(".weight_g")) n += static_cast<uint64_t>(shape_numel(s.shape));
  return n * sizeof(float);
}

// ---------------------------------------------------------------------------------------------------------------
// Forward

namespace {

Tensor run_conv(Backend& be, const Conv& c, const Tensor& x) {
  const int64_t T = conv1d_output_length(x.dim(2), c.w.dim(2), 1, c.padding, c.dilation);
  Tensor y = be.empty({x.dim(0), c.w.dim(0), T}, DType::F32);
  be.conv1d(x, c.w, c.b ? &*c.b : nullptr, 1, c.padding, c.dilation, y);
  return y;
}

Tensor run_conv_transpose(Backend& be, const ConvTranspose& c, const Tensor& x) {
  const int64_t T = conv_transpose1d_output_length(x.dim(2), c.w.dim(2), c.stride, c.padding);
  Tensor y = be.empty({x.dim(0), c.w.dim(1), T}, DType::F32);
  be.conv_transpose1d(x, c.w, &c.b, c.stride, c.padding, y);
  return y;
}

Tensor run_activation(Backend& be, const AaSnakeBeta& a, const Tensor& x) {
  Tensor y = be.empty(x.shape(), DType::F32);
  be.snake_beta_aa(x, a.log_alpha, a.log_beta, a.up_filter, a.down_filter, y);
  return y;
}

// One AMP block; x is left unchanged (every block of a stage reads the same input).
Tensor run_amp_block(Backend& be, const AmpBlock& blk, const Tensor& x) {
  std::optional<Tensor> h;
  for (size_t m = 0; m < blk.convs1.size(); ++m) {
    const Tensor& in = h ? *h : x;
    Tensor u = run_conv(be, blk.convs1[m], run_activation(be, blk.acts[2 * m], in));
    Tensor r = run_conv(be, blk.convs2[m], run_activation(be, blk.acts[2 * m + 1], u));
    if (h) {
      be.residual_add(*h, r, nullptr);  // h = h + r
    } else {
      be.residual_add(r, x, nullptr);   // the first residual sum lands in a fresh tensor: x stays intact
      h = r;
    }
  }
  return *h;
}

}  // namespace

Tensor AudioVaeDecoder::decode(const Tensor& latents) {
  check_audio_latents(config_, latents);
  const int64_t B = latents.dim(0), C = latents.dim(1), A = latents.dim(2);
  // Denormalize per channel in float32, as the pipeline does: raw = normalized · std[c] + mean[c].
  Tensor z = latents.to(DType::F32);  // a copy
  float* Z = z.ptr<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const float s = static_cast<float>(config_.latents_std[c]), m = static_cast<float>(config_.latents_mean[c]);
      for (int64_t t = 0; t < A; ++t) {
        float& v = Z[(b * C + c) * A + t];
        v = v * s + m;
      }
    }
  Tensor x = run_conv(be_, w_->dec_in_proj, be_.upload(z, DType::F32));
  x = run_conv(be_, w_->conv_pre, x);
  for (const Stage& st : w_->stages) {
    x = run_conv_transpose(be_, st.up, x);
    // Mean of the stage's AMP blocks: summed in order, then divided by their count.
    std::optional<Tensor> sum;
    for (const AmpBlock& blk : st.blocks) {
      throw_if_cancelled();  // between AMP blocks (the decode is one piece: the blocks are its units)
      Tensor y = run_amp_block(be_, blk, x);
      if (sum)
        be_.residual_add(*sum, y, nullptr);
      else
        sum = y;
    }
    be_.divide(*sum, static_cast<float>(st.blocks.size()));
    x = *sum;
  }
  x = run_conv(be_, w_->conv_post, run_activation(be_, w_->activation_post, x));
  Tensor audio = be_.download(x).reshape({B, x.dim(2)});
  H3_CHECK(audio.dim(1) == config_.hop_length() * A, "audio VAE decoder produced ", audio.dim(1),
           " samples per channel, expected hop ", config_.hop_length(), " x ", A);
  float* Y = audio.ptr<float>();
  for (int64_t i = 0; i < audio.numel(); ++i) Y[i] = std::clamp(Y[i], -1.f, 1.f);
  return audio;
}

}  // namespace h3

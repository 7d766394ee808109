// The MiniMax-H3 audio VAE encoder (spec/audio_vae.md §4) and the conditioning encode of reference audio (§6.2,
// spec/sampling.md §4): a waveform at the VAE's sampling rate, right-padded with zeros to a multiple of the hop →
// DAC conv trunk (weight-normed Conv1d, Snake) → pre_block (LayerNorms, causal attention with head averaging and
// adaptive pooling, GeGLU MLP) → mean_proj = the posterior mean (logs_proj is never evaluated: MiniMax-H3 takes the
// mean and never samples). Mono network; the channels of a waveform are its batch items. Float32 on every backend.
#pragma once
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "io/config.h"
#include "io/snapshot.h"
#include "tensor/tensor.h"

namespace h3 {

// The longest reference audio the encoder takes: MiniMax-H3 generates at most 15 s and truncates a reference to the
// generated duration (the reference pipeline's max_duration; spec/audio_vae.md §10 sizes the pre_block's attention
// for it: at most 600 latents).
constexpr int64_t kMaxReferenceAudioSeconds = 15;

// The one check of a waveform for the encoder: [channels, samples] of a float dtype on the host, 1 or 2 channels,
// 1 ≤ samples ≤ kMaxReferenceAudioSeconds · sampling_rate, every sample finite. Throws one sentence naming the rule.
void check_audio_waveform(const AudioVaeConfig& config, const Tensor& waveform);

class AudioVaeEncoder {
 public:
  // Reads the config (diffusers or original layout, audio_vae_component_at), checks every encoder tensor against
  // audio_vae_manifest (names, shapes, float dtypes), folds weight norm and uploads the weights the posterior mean
  // needs as F32.
  static std::unique_ptr<AudioVaeEncoder> load(Backend& backend, const Component& audio_vae);
  // An encoder of random weights made on the backend (models/random_weights.h), for benchmarks at the released size:
  // folded weights with row norms near 0.75, small biases, LayerNorm weights near 1, Snake alphas N(1, 0.3), a zero
  // key bias. Empty latents_mean / latents_std in `config` become 0 / 1. Deterministic for a seed.
  static std::unique_ptr<AudioVaeEncoder> random(Backend& backend, AudioVaeConfig config, uint64_t seed);
  // Bytes the loaded weights occupy on a backend: the encoder, pre_block and mean_proj tensors in float32 with weight
  // norm folded (no weight_g) and logs_proj left out.
  static uint64_t weight_bytes(const AudioVaeConfig& config);
  // Peak bytes of the activations encode() holds at once for `channels` × `samples` (before the hop padding),
  // beyond the weights and the backends' own scratch (cuDNN's convolution workspace, at most 256 MiB; the CUDA
  // pooled attention's per-head outputs; the CPU convolution's copy of its input). The conv trunk dominates: three
  // [channels, C, L] tensors live in a residual unit, largest at the first levels: 3 · encoder_dim · padded samples
  // floats per channel at the release's rates.
  static uint64_t working_bytes(const AudioVaeConfig& config, int64_t channels, int64_t samples);
  ~AudioVaeEncoder();

  // waveform [C, S] (host, any float dtype, C ∈ {1, 2}, at config().sampling_rate) → the posterior mean
  // [C, latent_channels, A] float32 (host), A = latents_for(S): each channel is encoded as its own batch item after
  // zero padding to hop · ⌈S / hop⌉ samples (AutoencoderKLMiniMaxH3Audio.encode). Raw latents (not normalized).
  Tensor encode(const Tensor& waveform);
  // The clean reference rows of one audio reference or video soundtrack (the reference's
  // MiniMaxH3Ref2VAReferenceEncoderStep): waveform [C, S] as for encode, already truncated to the request's duration
  // and at the VAE's rate; mono is duplicated to stereo first (its setup step's upmix). Returns [2·A,
  // latent_channels] float32 (host), channel-major: rows [0, A) are channel 0, rows [A, 2A) channel 1, each row
  // (mean − latents_mean) / latents_std in float32.
  Tensor encode_reference(const Tensor& waveform);

  // Latents per channel for S input samples: ⌈S / hop⌉ (the trunk's output length on the padded input).
  int64_t latents_for(int64_t samples) const;
  const AudioVaeConfig& config() const;

  struct Weights;  // defined in the .cpp

 private:
  AudioVaeEncoder(Backend& backend, AudioVaeConfig config, std::unique_ptr<Weights> weights);
  Tensor encode_padded(const Tensor& padded);
  Tensor trunk(Tensor padded);
  Tensor pre_block(const Tensor& rows, int64_t channels);
  Backend& be_;
  AudioVaeConfig config_;
  std::unique_ptr<Weights> w_;
  // The backend's convolutions are faster channels-last (Backend::prefers_channels_last_conv1d): the trunk runs on
  // [B, T, C] tensors with its weights stored [Cout, k, Cin].
  bool channels_last_ = false;
};

}  // namespace h3

// What each component's checkpoint must hold: tensor names, shapes and released dtypes, derived from its config.
// `h3 --info` checks checkpoints against these lists, and `h3 tool make-tiny-model` writes random weights from them.
#pragma once
#include <string>
#include <vector>

#include "io/config.h"
#include "io/snapshot.h"
#include "tensor/tensor.h"

namespace h3 {

struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype;  // the released checkpoint's dtype (loaders accept any float dtype)
};

// MiniMax-H3 transformer: 638 tensors (diffusers) / 535 (original, incl. rope.inv_freq) at full size.
std::vector<TensorSpec> dit_manifest(const DitConfig& c, Layout layout);
// Qwen3-VL: embed_tokens + the first kConditionerLayers decoder layers (+ the vision tower when asked).
std::vector<TensorSpec> text_encoder_manifest(const TextEncoderConfig& c, bool with_vision);
// Video VAE (diffusers or original naming); the encoder only when asked.
std::vector<TensorSpec> video_vae_manifest(const VideoVaeConfig& c, Layout layout, bool with_encoder);
// Audio VAE (same names in both layouts); the encoder only when asked.
std::vector<TensorSpec> audio_vae_manifest(const AudioVaeConfig& c, bool with_encoder);

}  // namespace h3

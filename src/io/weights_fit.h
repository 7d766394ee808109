// Whether a component's config fits the tensors its checkpoint holds, judged on the safetensors headers alone
// (issue 22, item 3). The snapshot's config loaders (io/snapshot.h) run these on the values as read, before the
// config's own range checks and before anything is sized from them, so a config that claims 10^9 blocks while the
// weights hold 50 is refused in one sentence naming the file, the key, its value and what the weights hold:
//   transformer/config.json: num_layers is 1000000000 but the weights hold 50 blocks (transformer_blocks.0 .. 49)
// Tensors the checkpoint lacks are not judged here (the loaders and `h3 --info` name them); an optional part the
// weights do not hold at all (the video VAE's encoder, the vision tower) is not judged either.
#pragma once
#include <string>
#include <vector>

#include "io/config.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "io/snapshot.h"

namespace h3 {

// Each throws the first disagreement. They take configs that are not validated yet: every size they compute is
// saturated, never overflowed, and no list is walked past what the weights hold.
void check_dit_fits_weights(const DitConfig& c, Layout layout, const Checkpoint& ck, const std::string& file);
void check_video_vae_fits_weights(const VideoVaeConfig& c, Layout layout, const Checkpoint& ck,
                                  const std::string& file);
void check_audio_vae_fits_weights(const AudioVaeConfig& c, const Checkpoint& ck, const std::string& file);
void check_text_encoder_fits_weights(const TextEncoderConfig& c, const Checkpoint& ck, const std::string& file);

// Whether a Qwen3-VL checkpoint holds a vision tower (its first block).
bool holds_vision_tower(const Checkpoint& ck);

// After validation, every tensor of `manifest` that the checkpoint holds must have the shape the config implies;
// throws the first that does not, naming `file`. This catches what the key-by-key checks above do not name.
void check_manifest_shapes(const std::vector<TensorSpec>& manifest, const Checkpoint& ck, const std::string& file);

}  // namespace h3

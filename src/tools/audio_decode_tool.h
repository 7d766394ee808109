// `h3 tool audio-decode --audio-vae DIR --latents IN.safetensors --out OUT.safetensors [--device cpu|cuda|auto]`:
// decodes normalized audio latents `audio_latents` [channels (1 or 2), latent_channels, A] with the audio VAE decoder
// and writes `audio` [channels, hop·A] float32 (metadata: sampling_rate) to OUT atomically.
#pragma once

namespace h3 {

// argv[0] is the tool's name, options follow. Returns 0 on success, 1 on a runtime error, 2 on a usage error
// (messages on stderr).
int tool_audio_decode(int argc, char** argv);

}  // namespace h3

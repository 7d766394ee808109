// `h3 tool denoise --transformer DIR --case CASE.safetensors --out OUT.safetensors [--device cpu|cuda|auto]`:
// the whole t2va denoising loop (layout, both schedules, every DiT pass, unpacking) from injected noise, for parity
// against the reference's `MiniMaxH3CoreDenoiseStep`. Writes the final `latents` and `audio_latents` (normalized
// latent space, float32) atomically; the loop's time goes to stderr.
#pragma once

namespace h3 {

// argv[0] is the tool's own name and is skipped; the options follow. Returns the exit status: 0 on success,
// 1 when the case, the model or the run fails (one line on stderr, nothing written), 2 for bad usage.
int tool_denoise(int argc, char** argv);

}  // namespace h3

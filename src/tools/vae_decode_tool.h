// `h3 tool vae-decode --vae DIR --latents IN.safetensors --out OUT.safetensors [--tile PX] [--tile-overlap PX]
//  [--device cpu|cuda|auto]`: decodes normalized video latents (IN: `latents` [1, C, F, h, w]) with the video VAE of
// DIR (a diffusers `vae/` or an original `video_vae/` folder) into OUT: `video` [1, 3, frames, H, W] float32 in
// [0, 1], written atomically.
#pragma once

namespace h3 {

// argv[0] is the tool name ("vae-decode"). Returns the process exit code (0 ok, 1 failure, 2 usage error).
int tool_vae_decode(int argc, char** argv);

}  // namespace h3

// Video frames resized with libswscale's Lanczos filter: the render canvas' upscale (--render-width/--render-height,
// issue 16), applied to the decoded frames before previews, --frames-dir, the frame callback and encoding.
//
// Each channel plane of each frame is scaled on its own as a float32 grey image (AV_PIX_FMT_GRAYF32, so no colour
// conversion mixes the planes) with SWS_LANCZOS (swscale's default of 3 lobes), SWS_ACCURATE_RND and SWS_BITEXACT
// (the same values on every CPU). swscale carries 16-bit samples inside: the values come back on a 1/65535 grid,
// clipped to [0, 1].
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace h3 {

// frames: host F32 [3, n, h, w] (channel planes, as the video decoder gives them) → [3, n, height, width].
Tensor scale_frames_lanczos(const Tensor& frames, int64_t width, int64_t height);

}  // namespace h3

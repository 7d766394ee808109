// The Qwen3-VL image processor (spec/conditioner.md §5; the reference is transformers' Qwen2VLImageProcessor with
// its torchvision backend — what Qwen3VLProcessor.from_pretrained loads in transformers 5.17 for both processor
// layouts and both type names, tools/reference/fx_vision.py): 8-bit RGB images to the vision tower's patch rows.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "io/config.h"
#include "io/snapshot.h"
#include "media/video_frames.h"
#include "models/qwen3vl/vision_grid.h"
#include "tensor/tensor.h"

namespace h3 {

// The patch rows of a list of images and their grids, in order.
struct QwenVisionInputs {
  // Host F32 [Σ grid.patches(), 3 · temporal_patch_size · patch_size²]: image after image, each in merge-block order
  // (t_block, h_block, w_block, h_in_block, w_in_block), each row's values ordered (channel, frame, y, x).
  Tensor pixel_values;
  std::vector<ImageGrid> grids;  // (1, H'/patch, W'/patch) per image
};

// The processor/ component's image-processor settings (its one config file, in either layout).
ImageProcessorConfig load_image_processor_config(const Component& processor);

// transformers' smart_resize: the (height, width) an image of height × width pixels is resized to — both multiples
// of `factor`, aspect ratio kept as nearly as the rounding allows, the area brought into [min_pixels, max_pixels].
// Python's arithmetic (round half to even, float division). Throws for an empty image or an aspect ratio above 200
// (the reference's limit).
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                         int64_t max_pixels);

// Every image resized to its smart_resize size (torchvision's antialiased bicubic on 8 bits, media/torch_resize.h;
// untouched when the size is already right), normalized in float32 as (u8 − mean·(1/rescale)) / (std·(1/rescale))
// with those constants rounded to float32 first (the reference fuses rescale and normalize so), repeated to
// temporal_patch_size frames and cut into patches. Equal to the reference's pixel_values and image_grid_thw bit for
// bit. Throws for an empty list or an image that is empty or misshapen.
QwenVisionInputs prepare_images(const ImageProcessorConfig& config, const std::vector<Rgb8Image>& images);

}  // namespace h3

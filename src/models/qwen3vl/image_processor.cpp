#include "models/qwen3vl/image_processor.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "media/torch_resize.h"
#include "models/qwen3vl/patch_rows.h"
#include "util/error.h"

namespace h3 {

ImageProcessorConfig load_image_processor_config(const Component& processor) {
  H3_CHECK(processor.present && !processor.config_files.empty(), "the snapshot has no processor/ component (needed for "
           "the image processor's settings: preprocessor_config.json or processor_config.json)");
  const std::string& file = processor.config_files.front();
  return parse_image_processor_config(parse_json_file(file), file);
}

std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                         int64_t max_pixels) {
  H3_CHECK(height > 0 && width > 0, "an image must be at least 1x1 pixels, got ", width, "x", height);
  H3_CHECK(factor > 0, "smart_resize: the factor must be positive, got ", factor);
  const double h = static_cast<double>(height), w = static_cast<double>(width), f = static_cast<double>(factor);
  const double aspect = static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  H3_CHECK(aspect <= 200, "an image's aspect ratio must be at most 200, got ", width, "x", height);
  // Python's round() on a float rounds half to even, as nearbyint does in the default rounding mode.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

QwenVisionInputs prepare_images(const ImageProcessorConfig& config, const std::vector<Rgb8Image>& images) {
  config.validate("image processor config");
  H3_CHECK(!images.empty(), "the image processor needs at least one image");
  const int64_t p = config.patch_size, row = 3 * config.temporal_patch_size * p * p;
  std::vector<Rgb8Image> resized;
  resized.reserve(images.size());
  QwenVisionInputs in;
  int64_t rows = 0;
  for (size_t k = 0; k < images.size(); ++k) {
    const Rgb8Image& img = images[k];
    H3_CHECK(img.width > 0 && img.height > 0 &&
                 img.rgb.size() == static_cast<size_t>(img.width) * static_cast<size_t>(img.height) * 3,
             "image ", k + 1, " must be at least 1x1 RGB pixels with width·height·3 bytes, got ", img.width, "x",
             img.height, " with ", img.rgb.size(), " bytes");
    const auto [h, w] = smart_resize(img.height, img.width, config.factor(), config.min_pixels, config.max_pixels);
    resized.push_back(h == img.height && w == img.width
                          ? img
                          : resize_bicubic_antialiased(img, static_cast<int>(w), static_cast<int>(h)));
    in.grids.push_back({1, h / p, w / p});
    rows += in.grids.back().patches();
  }
  in.pixel_values = Tensor::empty({rows, row}, DType::F32);
  const PixelNormalization n = fused_normalization(config.image_mean, config.image_std, config.rescale_factor);
  float* out = in.pixel_values.ptr<float>();
  for (size_t k = 0; k < resized.size(); ++k) {
    // An image is one frame, repeated to the temporal patch size.
    const std::vector<const uint8_t*> frames(static_cast<size_t>(config.temporal_patch_size), resized[k].rgb.data());
    write_patch_rows(frames, resized[k].width, resized[k].height, p, config.merge_size, config.temporal_patch_size, n,
                     out);
    out += in.grids[k].patches() * row;
  }
  return in;
}

}  // namespace h3

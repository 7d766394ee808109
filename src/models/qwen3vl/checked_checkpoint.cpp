#include "models/qwen3vl/checked_checkpoint.h"

#include "io/manifest.h"
#include "util/error.h"

namespace h3 {

CheckedQwenCheckpoint::CheckedQwenCheckpoint(const std::string& weights, const TextEncoderConfig& config,
                                             bool with_vision)
    : ck_(Checkpoint::open(weights)) {
  for (const TensorSpec& s : text_encoder_manifest(config, with_vision)) shapes_[s.name] = s.shape;
}

Tensor CheckedQwenCheckpoint::get(const std::string& name) const {
  H3_CHECK(ck_.has(name), ck_.location(), ": tensor '", name, "' is missing");
  Tensor t = ck_.get(name);
  const Shape& want = shapes_.at(name);
  H3_CHECK(t.shape() == want, ck_.location(), ": tensor '", name, "' has shape ", shape_str(t.shape()),
           ", the config implies ", shape_str(want));
  H3_CHECK(dtype_is_float(t.dtype()), ck_.location(), ": tensor '", name, "' has dtype ", dtype_name(t.dtype()),
           ", expected a float dtype");
  return t;
}

}  // namespace h3

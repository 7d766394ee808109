// A Qwen3-VL checkpoint whose tensors are checked, as they are read, against the shapes the config implies
// (io/manifest.h): a missing tensor, a wrong shape or a non-float dtype is an error naming the tensor.
#pragma once
#include <map>
#include <string>

#include "io/config.h"
#include "io/safetensors.h"

namespace h3 {

class CheckedQwenCheckpoint {
 public:
  // `with_vision`: also the vision tower's tensors (model.visual.*).
  CheckedQwenCheckpoint(const std::string& weights, const TextEncoderConfig& config, bool with_vision);
  Tensor get(const std::string& name) const;

 private:
  Checkpoint ck_;
  std::map<std::string, Shape> shapes_;
};

}  // namespace h3

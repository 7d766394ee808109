// Test helper: the source checkout the fixtures are read from. On the GPU machine the checkout lives elsewhere than
// where the tests were built: H3_SOURCE_DIR in the environment (when set and not empty) overrides the build's path.
#pragma once
#include <cstdlib>
#include <string>

namespace h3 {

inline std::string test_source_dir() {
  const char* env = std::getenv("H3_SOURCE_DIR");
  return env && *env ? env : H3_SOURCE_DIR;
}

}  // namespace h3

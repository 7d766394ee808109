// `h3 tool make-tiny-model DIR [--seed N]`: a complete tiny random-weight snapshot in the diffusers root layout
// (configs with tiny sizes, the real key names and released dtypes, sharded safetensors where the release shards,
// tokenizer files), for the demo, the tests and a user checking a build.
#pragma once
#include <cstdint>
#include <string>

namespace h3 {

void make_tiny_model(const std::string& dir, uint64_t seed);

}  // namespace h3

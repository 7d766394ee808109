// `h3 tool dit --transformer DIR --case CASE.safetensors --out OUT.safetensors [--device cpu|cuda|auto]`:
// one DiT forward on tensors named exactly as the reference forward's arguments; writes `sample` and
// `audio_sample` (float32, batch axis of 1) atomically. The forward time goes to stderr.
#pragma once
#include <string>

#include "models/dit/dit.h"

namespace h3 {

// Reads a case file of the tool's contract (the reference forward's argument names, batch axis 1) and validates it
// against `c`; every error names the file and the tensor.
DitForwardArgs read_dit_case(const std::string& path, const DitConfig& c);

// argv[0] is the tool's own name and is skipped; the options follow. Returns the exit status: 0 on success,
// 1 when the case, the model or the run fails (one line on stderr, nothing written), 2 for bad usage.
int tool_dit(int argc, char** argv);

}  // namespace h3

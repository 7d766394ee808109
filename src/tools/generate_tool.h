#pragma once

namespace h3 {

// h3 tool generate --model DIR --request REQUEST.json [--noise NOISE.safetensors] --out OUT.safetensors
//                  [--device cpu|cuda|auto] [--tile PX --tile-overlap PX]
// One whole generation through the engine, as the reference pipeline returns it before any encoding.
int tool_generate(int argc, char** argv);

}  // namespace h3

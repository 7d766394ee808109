// The whole t2va pipeline at the released sizes with random weights made on the GPU: isolated conditioner, video
// and audio decode timings and one generation per shape (src/tools/bench_pipeline_tool.h; also `h3 tool
// bench-pipeline`). A binary of its own so that the GPU bundle links it without FFmpeg (scripts/gpu/bundle.sh).
//   bench_pipeline [--shapes 864x480x124,1344x768x124] [--passes 2] [--tiny --device cpu] [--fl2va] ...
#include "tools/bench_pipeline_tool.h"

int main(int argc, char** argv) { return h3::tool_bench_pipeline(argc, argv); }

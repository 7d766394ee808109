// `h3 tool ...` without the CLI's media and line-editing libraries, for machines that lack them (the GPU machine's
// image has no FFmpeg): gpu_tool NAME [options] runs the same tool registry as `h3 tool NAME`.
#include "tools/registry.h"

int main(int argc, char** argv) { return h3::run_tool(argc - 1, argv + 1); }

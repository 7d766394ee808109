#include "tools/registry.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "tools/tokenize_tool.h"
#include "tools/audio_decode_tool.h"
#include "tools/bench_pipeline_tool.h"
#include "tools/denoise_tool.h"
#include "tools/dit_tool.h"
#include "tools/encode_text_tool.h"
#include "tools/generate_tool.h"
#include "tools/tiny_model.h"
#include "tools/vae_decode_tool.h"
#include "util/error.h"

namespace h3 {

int tool_make_tiny_model(int argc, char** argv) {
  std::string dir;
  uint64_t seed = 0;
  int64_t transformer_blocks = kTinyTransformerBlocks;
  bool force = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--force") {
      force = true;
    } else if (a == "--transformer-blocks" && i + 1 < argc) {
      char* end = nullptr;
      transformer_blocks = std::strtoll(argv[++i], &end, 10);
      if (!end || *end || transformer_blocks < 1 || transformer_blocks > 64) {
        std::fprintf(stderr, "h3 tool make-tiny-model: --transformer-blocks must be 1..64, got '%s'\n", argv[i]);
        return 2;
      }
    } else if (a == "--seed" && i + 1 < argc) {
      char* end = nullptr;
      seed = std::strtoull(argv[++i], &end, 10);
      if (!end || *end) {
        std::fprintf(stderr, "h3 tool make-tiny-model: --seed must be a non-negative integer, got '%s'\n", argv[i]);
        return 2;
      }
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: h3 tool make-tiny-model DIR [--seed N] [--transformer-blocks N] [--force]\n"
                  "Writes a complete tiny random-weight MiniMax-H3 snapshot (diffusers root layout) to DIR, which must\n"
                  "not exist or be empty (--force: write into a folder that is not empty, replacing its snapshot files).\n"
                  "--transformer-blocks: the transformers' blocks, 1..64 (default 2; e.g. 10 to try --layers).\n");
      return 0;
    } else if (!a.empty() && a[0] != '-' && dir.empty()) {
      dir = a;
    } else {
      std::fprintf(stderr, "h3 tool make-tiny-model: unexpected argument '%s' (usage: DIR [--seed N] [--transformer-blocks N] [--force])\n",
                   a.c_str());
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "h3 tool make-tiny-model: the output folder is required (usage: DIR [--seed N] [--force])\n");
    return 2;
  }
  // The target first (a snapshot written over a real 130 GB download, or over a file, is a disaster): a folder that
  // does not exist or is empty, unless --force.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(dir, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_directory(st)) {
    std::fprintf(stderr, "h3 tool make-tiny-model: %s exists and is not a folder.\n", dir.c_str());
    return 2;
  }
  if (std::filesystem::is_directory(st) && !force &&
      std::filesystem::directory_iterator(dir, ec) != std::filesystem::directory_iterator()) {
    std::fprintf(stderr,
                 "h3 tool make-tiny-model: %s is not empty; give an empty or new folder (or --force to write the "
                 "snapshot into it).\n",
                 dir.c_str());
    return 2;
  }
  try {
    make_tiny_model(dir, seed, transformer_blocks);
  } catch (const Error& e) {
    std::fprintf(stderr, "h3 tool make-tiny-model: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "h3 tool make-tiny-model: cannot write %s: %s.\n", dir.c_str(), e.code().message().c_str());
    return 1;
  }
  std::printf("tiny model written to %s\n", dir.c_str());
  return 0;
}

const std::vector<ToolEntry>& tools() {
  static const std::vector<ToolEntry> t = {
      {"make-tiny-model", "write a tiny random-weight snapshot (diffusers root layout)", tool_make_tiny_model},
      {"tokenize", "print the token ids of a text as a JSON array", tool_tokenize},
      {"dit", "one transformer forward on a case file (parity harness)", tool_dit},
      {"denoise", "the denoising loop on a case file (injected noise and prompt embeddings)", tool_denoise},
      {"encode-text", "run the Qwen3-VL conditioner on a prompt (hidden state after layer 50)", tool_encode_text},
      {"vae-decode", "decode normalized video latents to RGB frames (tiled, chunked)", tool_vae_decode},
      {"audio-decode", "decode normalized audio latents to a 32 kHz stereo waveform", tool_audio_decode},
      {"generate", "one whole generation from a request file (parity harness: noise injectable)", tool_generate},
      {"bench-pipeline", "time the whole pipeline at full size with random weights made on the GPU",
       tool_bench_pipeline},
  };
  return t;
}

int run_tool(int argc, char** argv) {
  if (argc < 1 || !std::strcmp(argv[0], "-h") || !std::strcmp(argv[0], "--help")) {
    std::printf("usage: h3 tool NAME [options]   (h3 tool NAME --help for each)\n");
    for (const auto& t : tools()) std::printf("  %-16s %s\n", t.name, t.summary);
    return argc < 1 ? 2 : 0;
  }
  for (const auto& t : tools())
    if (!std::strcmp(argv[0], t.name)) return t.main(argc, argv);
  std::fprintf(stderr, "h3: unknown tool '%s' (h3 tool --help lists them)\n", argv[0]);
  return 2;
}

}  // namespace h3

// CPU baseline of the DiT forward (the oracle's speed, not a target):
//  1. the smallest reference fixture (tests/fixtures/dit/unit_test; a random model of the same shape when the
//     fixture is absent);
//  2. a 2-block model at FULL width (hidden 5376, 56 x 128 heads, ffn 14336, text_dim 5120, the released config
//     otherwise, incl. 2 refiner blocks) with random bf16 weights, on L = 300 rows (36 text + 74 audio + 190 video)
//     and 3 timesteps.
// Each number is the median of 3 runs after one warm-up, as wall time and as process CPU time (all threads; robust
// to other load on the machine). "forward" = begin_request + step with a timestep list not
// seen before (so the AdaLN tables are rebuilt: a complete reference forward); "step" = one sampling step of a
// request that has begun (what the sampler pays per step).
//
// usage: bench_dit_cpu [--model-dir DIR] [--small-only | --full-only]
//   --model-dir DIR  keep the generated full-width weights in DIR and reuse them on the next run (default: a
//                    temporary folder, removed afterwards)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "backend/backend.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/dit/dit.h"
#include "tools/dit_tool.h"
#include "util/error.h"
#include "util/thread_pool.h"

using namespace h3;
namespace fs = std::filesystem;

namespace {

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double wall = 0, cpu = 0;  // seconds
};

Timing median_of_3_after_warmup(const std::function<void(int)>& run) {
  run(0);
  std::vector<double> wall, cpu;
  for (int i = 1; i <= 3; ++i) {
    const double c0 = process_cpu_seconds();
    wall.push_back(seconds_of([&] { run(i); }));
    cpu.push_back(process_cpu_seconds() - c0);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[1], cpu[1]};
}

// Counter-based uniform draws in [-1, 1) (the splitmix64 finalizer of (seed, index)): deterministic however the
// generation is split across threads.
float uniform(uint64_t seed, int64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.f / 8388608.f) - 1.f;
}

// Values of unit-ish scale for what the tensor is: norms 1 ± 0.1, biases ± 0.1, matrices uniform with
// std 1/sqrt(fan_in).
Tensor random_tensor(const TensorSpec& s, uint64_t seed) {
  Tensor t = Tensor::empty(s.shape, s.dtype);
  const bool matrix = s.shape.size() == 2;
  const bool norm = !matrix && s.name.find("norm") != std::string::npos && s.name.find("linear") == std::string::npos;
  const float half_width = matrix ? std::sqrt(3.f / static_cast<float>(s.shape[1])) : 0.1f;
  const float center = norm ? 1.f : 0.f;
  float* f32 = s.dtype == DType::F32 ? t.ptr<float>() : nullptr;
  uint16_t* b16 = s.dtype == DType::F32 ? nullptr : t.u16();
  parallel_for(0, t.numel(), 1 << 20, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = center + half_width * uniform(seed, i);
      if (f32)
        f32[i] = v;
      else
        b16[i] = f32_to_bf16(v);
    }
  });
  return t;
}

DitConfig full_width_two_blocks() {
  DitConfig c;  // the released config
  c.num_layers = 2;
  return c;
}

// Writes the random full-width model: one safetensors file per block (and one for the rest), diffusers layout,
// release dtypes (bf16 + the F32 modules).
void write_full_width_model(const std::string& dir, const DitConfig& c) {
  fs::create_directories(dir);
  // Block tensors are contiguous in the manifest: each block is written as soon as it is complete; the few global
  // tensors (spread over the manifest) are written last.
  auto block_of = [](const std::string& name) {
    for (const char* p : {"token_refiner.refiner_blocks.", "transformer_blocks."})
      if (name.rfind(p, 0) == 0) return name.substr(0, name.find('.', std::strlen(p)));
    return std::string();
  };
  uint64_t seed = 1;
  std::string current;
  std::vector<NamedTensor> block, globals;
  auto flush = [&] {
    if (!block.empty()) write_safetensors(dir + "/" + current + ".safetensors", block);
    block.clear();
  };
  for (const TensorSpec& s : dit_manifest(c, Layout::Diffusers)) {
    const std::string b = block_of(s.name);
    if (b.empty()) {
      globals.push_back({s.name, random_tensor(s, seed++)});
      continue;
    }
    if (b != current) {
      flush();
      current = b;
    }
    block.push_back({s.name, random_tensor(s, seed++)});
  }
  flush();
  write_safetensors(dir + "/globals.safetensors", globals);
  nlohmann::json j = {{"_class_name", "MiniMaxH3Transformer3DModel"}, {"num_layers", c.num_layers}};
  std::ofstream(dir + "/config.json") << j.dump(2);  // every other field: the released defaults
}

Tensor random_rows(int64_t rows, int64_t cols, uint64_t seed) {
  return random_tensor({"x", {rows, cols}, DType::F32}, seed);
}

// 36 text + 74 audio + 190 video rows (5 latent frames of 2 x 19 patches), text at t = 1, video and audio at their
// own levels.
DitForwardArgs full_width_case(const DitConfig& c) {
  const int64_t Nt = 36, Na = 74, Nv = 190, L = Nt + Na + Nv;
  DitForwardArgs a;
  a.timestep = {0.5f, 0.7f, 1.f};
  a.position_ids = Tensor::zeros({L, 3}, DType::F64);
  double* P = a.position_ids.ptr<double>();
  for (int64_t r = 0; r < L; ++r) {
    if (r < Nt) {
      a.text_indices.push_back(r);
      a.token_tags.push_back(kDitTagText);
      a.timestep_indices.push_back(2);
      P[r * 3] = static_cast<double>(r);
    } else if (r < Nt + Na) {
      a.audio_indices.push_back(r);
      a.token_tags.push_back(kDitTagAudio);
      a.timestep_indices.push_back(1);
      P[r * 3] = Nt + (r - Nt) * 0.1;
    } else {
      const int64_t v = r - Nt - Na;
      a.video_indices.push_back(r);
      a.token_tags.push_back(kDitTagVideo);
      a.timestep_indices.push_back(0);
      P[r * 3] = Nt + v / 38, P[r * 3 + 1] = (v / 19) % 2, P[r * 3 + 2] = v % 19;
    }
  }
  a.hidden_states = random_rows(Nv, c.patch_dim(), 101);
  a.audio_hidden_states = random_rows(Na, c.audio_in_channels, 102);
  a.encoder_hidden_states = random_rows(Nt, c.text_dim, 103);
  return a;
}

// The two medians of one model and case.
void bench(Dit& dit, const DitForwardArgs& args, const char* what) {
  const Timing forward = median_of_3_after_warmup([&](int i) {
    DitForwardArgs a = args;
    for (float& t : a.timestep) t = std::min(1.f, t + 1e-3f * static_cast<float>(i));  // a new list every run
    dit.forward(a);
  });
  const DitLayout layout{args.token_tags, args.position_ids, args.video_indices, args.audio_indices,
                         args.text_indices};
  dit.begin_request(layout, args.encoder_hidden_states, args.timestep);
  const Timing step = median_of_3_after_warmup(
      [&](int) { dit.step(args.hidden_states, args.audio_hidden_states, args.timestep_indices); });
  dit.end_request();
  std::printf("%s, L = %lld:\n  forward %11.3f ms wall %11.3f ms CPU\n  step    %11.3f ms wall %11.3f ms CPU\n", what,
              static_cast<long long>(args.position_ids.dim(0)), forward.wall * 1e3, forward.cpu * 1e3,
              step.wall * 1e3, step.cpu * 1e3);
  std::fflush(stdout);
}

void bench_smallest_fixture(Backend& be) {
  const std::string dir = std::string(H3_SOURCE_DIR) + "/tests/fixtures/dit/unit_test";
  if (!fs::exists(dir + "/case.safetensors")) {
    std::printf("smallest fixture: %s is missing (branch ref-fixtures); skipped\n", dir.c_str());
    return;
  }
  const Component comp = dit_component_from_dir(dir + "/transformer");
  auto dit = Dit::load(be, comp);
  bench(*dit, read_dit_case(dir + "/case.safetensors", dit->config()), "smallest fixture (dit/unit_test)");
}

void bench_full_width(Backend& be, std::string model_dir) {
  const DitConfig c = full_width_two_blocks();
  const bool temporary = model_dir.empty();
  if (temporary) model_dir = (fs::temp_directory_path() / ("h3_bench_dit_" + std::to_string(::getpid()))).string();
  if (!fs::exists(model_dir + "/config.json")) {
    const double t = seconds_of([&] { write_full_width_model(model_dir, c); });
    std::printf("generated random bf16 full-width 2-block weights in %s (%.1f s)\n", model_dir.c_str(), t);
  }
  std::unique_ptr<Dit> dit;
  const double load = seconds_of([&] { dit = Dit::load(be, dit_component_from_dir(model_dir)); });
  std::printf("loaded in %.1f s\n", load);
  bench(*dit, full_width_case(c), "full width, 2 blocks + 2 refiner blocks, bf16 weights");
  dit.reset();
  if (temporary) fs::remove_all(model_dir);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir;
  bool small = true, full = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model-dir" && i + 1 < argc) {
      model_dir = argv[++i];
    } else if (a == "--small-only") {
      full = false;
    } else if (a == "--full-only") {
      small = false;
    } else {
      std::fprintf(stderr, "usage: bench_dit_cpu [--model-dir DIR] [--small-only | --full-only]\n");
      return 2;
    }
  }
  try {
    auto be = make_cpu_backend();
    std::printf("bench_dit_cpu: CPU backend, %d threads; median of 3 after a warm-up\n", thread_count());
    if (small) bench_smallest_fixture(*be);
    if (full) bench_full_width(*be, model_dir);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_dit_cpu: %s\n", e.what());
    return 1;
  }
}

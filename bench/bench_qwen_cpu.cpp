// CPU time of the MiniMax-H3 conditioner's text stack at full width (hidden 5120, 64/8 heads × 128, intermediate
// 25600): 50 such layers are 25B parameters, 97 GiB as float32 — far beyond a small machine — so this times ONE
// full-width decoder layer with random bf16 weights (generated into a temporary folder, never committed), loaded and
// run through the real QwenTextModel code on the CPU backend, and extrapolates ×50 (the embedding lookup and the
// rotary tables, both negligible, are included once). The vocabulary is cut to 4096 rows: the lookup costs the same.
//
//   bench_qwen_cpu [--tokens N (300)] [--repeats R (3)]      (H3_THREADS sets the thread count)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/qwen3vl/text_model.h"
#include "tensor/dtype.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

using namespace h3;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kBenchVocab = 4096;

TextEncoderConfig full_width_config() {
  TextEncoderConfig c;  // the released text geometry (conditioner.md §2.1) is the default
  c.text.vocab_size = kBenchVocab;
  return c;
}

// Random bf16 values: uniform with variance 1/fan_in for matrices (activations stay O(1)), 1 ± small for norms.
Tensor random_bf16(const TensorSpec& s, uint64_t& state) {
  Tensor t = Tensor::empty(s.shape, DType::BF16);
  uint16_t* p = t.u16();
  const bool norm = s.shape.size() == 1;
  const float a = norm ? 0.1f : std::sqrt(3.0f / static_cast<float>(s.shape[1]));
  for (int64_t i = 0; i < t.numel(); ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float u = static_cast<float>(state >> 40) * (2.0f / 16777216.0f) - 1.0f;  // [-1, 1)
    p[i] = f32_to_bf16((norm ? 1.f : 0.f) + a * u);
  }
  return t;
}

// Writes embed_tokens + decoder layer 0 (and config.json) into `dir`.
void write_one_layer(const std::string& dir, const TextEncoderConfig& c) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  std::vector<NamedTensor> tensors;
  for (const TensorSpec& s : text_encoder_manifest(c, false))
    if (s.name.find(".layers.") == std::string::npos || s.name.find(".layers.0.") != std::string::npos)
      tensors.push_back({s.name, random_bf16(s, state)});
  write_safetensors(join_path(dir, "model.safetensors"), tensors);
  const auto& t = c.text;
  nlohmann::json text = {{"hidden_size", t.hidden_size}, {"num_hidden_layers", t.num_hidden_layers},
                         {"num_attention_heads", t.num_attention_heads}, {"num_key_value_heads", t.num_key_value_heads},
                         {"head_dim", t.head_dim}, {"intermediate_size", t.intermediate_size},
                         {"rms_norm_eps", t.rms_norm_eps}, {"vocab_size", t.vocab_size},
                         {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", t.rope_theta},
                                              {"mrope_section", t.mrope_section}, {"mrope_interleaved", true}}}};
  write_file_atomic(join_path(dir, "config.json"), nlohmann::json{{"text_config", text}}.dump(2));
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 300;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
  }
  try {
    const TextEncoderConfig c = full_width_config();
    const auto& t = c.text;
    const std::string dir = (fs::temp_directory_path() / cat("h3_bench_qwen_", ::getpid())).string();
    fs::create_directories(dir);
    double t0 = now_s();
    write_one_layer(dir, c);
    std::printf("wrote one random full-width layer (bf16) in %.1f s\n", now_s() - t0);

    auto backend = make_cpu_backend();
    t0 = now_s();
    auto model = QwenTextModel::load(*backend, c, dir, /*num_layers=*/1);
    std::printf("loaded it as float32 in %.1f s (%d threads)\n", now_s() - t0, thread_count());
    fs::remove_all(dir);

    std::vector<int32_t> ids(tokens);
    for (int64_t i = 0; i < tokens; ++i) ids[i] = static_cast<int32_t>((i * 2654435761u) % kBenchVocab);
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      t0 = now_s();
      Tensor h = model->encode(ids);
      const double dt = now_s() - t0;
      best = std::min(best, dt);
      std::printf("  run %d: %.2f s (row 0 |h| = %.3f)\n", r, dt, std::sqrt(h.ptr<float>()[0] * h.ptr<float>()[0]));
    }
    const double layer_params = static_cast<double>(t.hidden_size) *
                                    ((t.num_attention_heads + 2 * t.num_key_value_heads) * t.head_dim +
                                     t.num_attention_heads * t.head_dim + 3 * t.intermediate_size);
    const double gemm_flops = 2.0 * layer_params * tokens;
    const double attn_flops = 4.0 * t.num_attention_heads * t.head_dim * tokens * (tokens + 1) / 2.0;
    std::printf("one layer, %lld tokens: %.2f s (best of %d), %.1f GFLOP/s\n", static_cast<long long>(tokens), best,
                repeats, (gemm_flops + attn_flops) / best / 1e9);
    std::printf("extrapolated 50 layers: %.0f s (%.1f min) on the CPU backend\n", best * kConditionerLayers,
                best * kConditionerLayers / 60);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_qwen_cpu: %s\n", e.what());
    return 1;
  }
}

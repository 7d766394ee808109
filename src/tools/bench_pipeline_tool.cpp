#include "tools/bench_pipeline_tool.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device.h"
#include "h3/h3.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "models/dit/dit_random.h"
#include "models/qwen3vl/text_model.h"
#include "models/video_vae/decoder.h"
#include "pipeline/engine_parts.h"
#include "pipeline/geometry.h"
#include "pipeline/memory_plan.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace h3 {

namespace {

using Clock = std::chrono::steady_clock;

// The acceptance targets of the GPU pipeline (issue 8), printed next to the measurements.
constexpr double kTargetConditionerSeconds = 0.040;
constexpr double kTargetVideo864Seconds = 1.6;
constexpr double kTargetVideo1344Seconds = 3.0;
constexpr double kReferenceAudioSeconds = 0.070;  // diffusers, 5.2 s stereo, /work/shared/bench/README.md
constexpr double kTargetPeakBytes = 100e9;
constexpr int64_t kConditionerTokens = 300;
constexpr int64_t kAudioBenchLatents = 207;  // 124 frames at 24 fps

struct Options {
  std::string device = "cuda";
  bool tiny = false;
  std::vector<std::array<int64_t, 3>> shapes;
  int64_t passes = 2;
  int reps_conditioner = 5, reps_video = 3, reps_audio = 5;
  bool isolated = true, generation = true;
  uint64_t seed = 1;
};

struct Shape3 {
  int64_t w, h, f;
  std::string str() const { return cat(w, "x", h, "x", f); }
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string json_list(const std::vector<double>& v, double scale = 1.0) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += cat(i ? "," : "", v[i] * scale);
  return s + "]";
}

// One `JSON {...}` line on stdout, appended to $OUT/bench_pipeline.jsonl when OUT is set.
void emit_json(const std::string& body) {
  std::printf("JSON {%s}\n", body.c_str());
  std::fflush(stdout);
  if (const char* out = std::getenv("OUT"); out && *out) {
    std::ofstream f(std::string(out) + "/bench_pipeline.jsonl", std::ios::app);
    f << "{" << body << "}\n";
  }
}

// Finite and not constant: the self-check every output passes.
struct Inspection {
  bool finite = true, varies = false;
  double min = 0, max = 0, mean = 0;
  bool ok() const { return finite && varies; }
  std::string str() const {
    return cat(ok() ? "ok" : "FAILED", " (", finite ? "finite" : "NON-FINITE", ", ", varies ? "varies" : "CONSTANT",
               ", min ", min, ", max ", max, ", mean ", mean, ")");
  }
};

Inspection inspect(const Tensor& t) {
  Inspection r;
  const Tensor f = t.dtype() == DType::F32 ? t : t.to(DType::F32);
  const float* p = f.ptr<float>();
  const int64_t n = f.numel();
  if (n == 0) return r;
  double sum = 0;
  r.min = r.max = p[0];
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(p[i])) {
      r.finite = false;
      continue;
    }
    r.min = std::min<double>(r.min, p[i]);
    r.max = std::max<double>(r.max, p[i]);
    sum += p[i];
  }
  r.mean = sum / static_cast<double>(n);
  r.varies = r.max > r.min;
  return r;
}

// Normal(0, 1) host tensor (deterministic for a seed).
Tensor host_randn(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::F32);
  random_normal_host(t, seed, 0.f, 1.f);
  return t;
}

// A wall-clock and a device-time measurement of fn() (the device time between marks before and after).
template <class F>
std::pair<double, double> measure(Backend& be, F&& fn) {
  be.synchronize();
  const auto d0 = be.mark_time();
  const auto t0 = Clock::now();
  fn();
  const auto d1 = be.mark_time();
  be.synchronize();
  return {seconds_since(t0), be.device_seconds(*d0, *d1)};
}

// A prompt of about `tokens` tokens under `tok`, starting with `opening` (whole words appended until the count is
// reached).
std::string prompt_of_tokens(const Tokenizer& tok, int64_t tokens, const std::string& opening) {
  static const char* kWords[] = {"a",     "red",   "fox",    "walks", "through", "fresh", "snow",  "under",
                                 "a",     "pale",  "winter", "sky",   "while",   "wind",  "moves", "the",
                                 "pines", "and",   "a",      "river", "runs",    "past",  "stone", "banks"};
  std::string p = opening;
  for (size_t i = 0; static_cast<int64_t>(tok.encode(p).size()) < tokens; ++i) {
    if (!p.empty()) p += ' ';
    p += kWords[i % std::size(kWords)];
  }
  return p;
}

int usage(const char* msg) {
  std::fprintf(stderr,
               "h3 tool bench-pipeline: %s\n"
               "usage: bench-pipeline [--device cuda|cpu] [--tiny] [--shapes WxHxF,...] [--passes N]\n"
               "       [--reps-conditioner N] [--reps-video N] [--reps-audio N] [--skip-isolated]\n"
               "       [--skip-generation] [--seed N]\n",
               msg);
  return 2;
}

bool parse_shapes(const char* s, std::vector<std::array<int64_t, 3>>& out) {
  out.clear();
  for (const char* p = s; *p;) {
    long long w = 0, h = 0, f = 0;
    if (std::sscanf(p, "%lldx%lldx%lld", &w, &h, &f) != 3 || w <= 0 || h <= 0 || f <= 0) return false;
    out.push_back({w, h, f});
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return !out.empty();
}

class Bench {
 public:
  explicit Bench(const Options& o) : o_(o) {}

  int run() {
    auto backend = make_backend(o_.device);
    Backend& be = *backend;
    std::printf("bench-pipeline: device %s, backend %s%s\n", describe(detect_compute_device()).c_str(),
                be.name().c_str(), o_.tiny ? ", TINY configurations" : ", released configurations");
    auto tok = std::make_unique<Tokenizer>(Tokenizer::from_json(make_tiny_tokenizer_json()));
    const ComponentConfigs cfg =
        o_.tiny ? tiny_component_configs(static_cast<int64_t>(tok->vocab_size())) : released_component_configs();

    // Every component resident at once, weights made on the device.
    const auto t_build = Clock::now();
    uint64_t dit_bytes = 0;
    EngineParts parts = random_engine_parts(std::move(backend), std::move(tok), cfg, o_.seed, &dit_bytes);
    be.synchronize();
    const double build_s = seconds_since(t_build);
    const MemoryStats m0 = be.memory_stats();
    std::printf("weights made in %.2f s: transformer %s (planned %s), text encoder %s, video VAE %s, audio VAE %s; "
                "allocator in use %s, device %s used of %s\n",
                build_s, format_gb(dit_bytes).c_str(),
                format_gb(dit_resident_bytes(cfg.dit, be.activation_dtype(), false)).c_str(),
                format_gb(QwenTextModel::resident_bytes(cfg.text, be.activation_dtype())).c_str(),
                format_gb(VideoVaeDecoder::weight_bytes(cfg.vae, video_vae_gemm_dtype(be))).c_str(),
                format_gb(AudioVaeDecoder::weight_bytes(cfg.audio)).c_str(), format_gb(m0.in_use).c_str(),
                format_gb(m0.device_total - m0.device_free).c_str(), format_gb(m0.device_total).c_str());
    emit_json(cat("\"bench\":\"pipeline_weights\",\"tiny\":", o_.tiny ? "true" : "false", ",\"build_s\":", build_s,
                  ",\"dit_GB\":", dit_bytes / 1e9, ",\"in_use_GB\":", m0.in_use / 1e9,
                  ",\"device_used_GB\":", (m0.device_total - m0.device_free) / 1e9));

    QwenTextModel* text_ptr = parts.text.get();
    VideoVaeDecoder* vae_ptr = parts.vae.get();
    AudioVaeDecoder* audio_ptr = parts.audio.get();
    tokenizer_ = parts.tokenizer.get();
    auto engine = Engine::from_parts(std::move(parts));

    if (o_.isolated) {
      conditioner(be, *text_ptr, cfg);
      audio_decode(be, *audio_ptr, cfg);
      for (const auto& s : shapes()) video_decode(be, *vae_ptr, cfg, s);
    }
    if (o_.generation)
      for (const auto& s : shapes()) generate(be, *engine, s);
    std::printf("bench-pipeline: %s\n", failures_ ? "SELF-CHECK FAILED" : "all self-checks passed");
    return failures_ ? 1 : 0;
  }

 private:
  std::vector<Shape3> shapes() const {
    std::vector<Shape3> v;
    for (const auto& s : o_.shapes) v.push_back({s[0], s[1], s[2]});
    return v;
  }

  void check(const char* what, const Inspection& r) {
    std::printf("  self-check %s: %s\n", what, r.str().c_str());
    if (!r.ok()) ++failures_;
  }

  TileOptions tiles(const Backend& be) const {
    TileOptions t;
    t.max_batch_tokens = default_video_vae_batch_tokens(be);
    return t;
  }

  void conditioner(Backend& be, QwenTextModel& text, const ComponentConfigs& cfg) {
    std::vector<int32_t> ids(kConditionerTokens);
    const int64_t vocab = cfg.text.text.vocab_size;
    for (int64_t i = 0; i < kConditionerTokens; ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % vocab);
    Tensor out;
    for (int i = 0; i < 2; ++i) out = text.encode(ids);  // warm-up: GEMM and attention plans
    check("conditioner output", inspect(out));
    std::vector<double> wall, dev;
    for (int i = 0; i < o_.reps_conditioner; ++i) {
      auto [w, d] = measure(be, [&] { out = text.encode(ids); });
      wall.push_back(w);
      dev.push_back(d);
    }
    const double med = median(dev);
    std::printf("conditioner: %lld tokens x %lld layers: device %.2f ms (median of %d; wall %.2f ms)  target <= "
                "%.0f ms: %s\n",
                (long long)kConditionerTokens, (long long)kConditionerLayers, med * 1e3, o_.reps_conditioner,
                median(wall) * 1e3, kTargetConditionerSeconds * 1e3,
                o_.tiny ? "n/a (tiny)" : med <= kTargetConditionerSeconds ? "met" : "NOT MET");
    emit_json(cat("\"bench\":\"conditioner\",\"tokens\":", kConditionerTokens, ",\"layers\":", kConditionerLayers,
                  ",\"median_ms\":", med * 1e3, ",\"device_ms\":", json_list(dev, 1e3), ",\"wall_ms\":",
                  json_list(wall, 1e3), ",\"ok\":", inspect(out).ok() ? "true" : "false"));
  }

  void audio_decode(Backend& be, AudioVaeDecoder& audio, const ComponentConfigs& cfg) {
    const Tensor z = host_randn({2, cfg.audio.latent_channels, kAudioBenchLatents}, o_.seed + 11);
    Tensor out = audio.decode(z);  // warm-up
    check("audio decode output", inspect(out));
    std::vector<double> wall, dev;
    be.op_profile_report();  // drops the warm-up's (and the conditioner's)
    for (int i = 0; i < o_.reps_audio; ++i) {
      auto [w, d] = measure(be, [&] { out = audio.decode(z); });
      wall.push_back(w);
      dev.push_back(d);
    }
    if (const std::string ops = be.op_profile_report(); !ops.empty())
      std::printf("audio decode, device time per op over %d decodes (H3_CUDA_PROFILE):\n%s", o_.reps_audio,
                  ops.c_str());
    const double med = median(wall);
    std::printf("audio decode: %lld latents x 2 channels -> %lld samples: %.1f ms wall (median of %d; device %.1f "
                "ms)  reference %.0f ms: %s\n",
                (long long)kAudioBenchLatents, (long long)out.dim(1), med * 1e3, o_.reps_audio, median(dev) * 1e3,
                kReferenceAudioSeconds * 1e3,
                o_.tiny ? "n/a (tiny)" : med <= kReferenceAudioSeconds ? "at or below" : "ABOVE");
    emit_json(cat("\"bench\":\"audio_decode\",\"latents\":", kAudioBenchLatents, ",\"median_s\":", med,
                  ",\"wall_s\":", json_list(wall), ",\"device_s\":", json_list(dev),
                  ",\"ok\":", inspect(out).ok() ? "true" : "false"));
  }

  void video_decode(Backend& be, VideoVaeDecoder& vae, const ComponentConfigs& cfg, const Shape3& s) {
    const int64_t frames = align_frame_count(s.f), sr = cfg.vae.spatial_ratio();
    const Tensor z = host_randn({cfg.vae.latent_channels, latent_frame_count(frames), s.h / sr, s.w / sr},
                                o_.seed + 21);
    const TileOptions t = tiles(be);
    be.reset_peak_memory();
    Tensor out = vae.decode(z, t);  // warm-up
    check(cat("video decode output ", s.str()).c_str(), inspect(out));
    std::vector<double> wall, dev;
    be.op_profile_report();  // drops the warm-up's
    for (int i = 0; i < o_.reps_video; ++i) {
      auto [w, d] = measure(be, [&] { out = vae.decode(z, t); });
      wall.push_back(w);
      dev.push_back(d);
    }
    if (const std::string ops = be.op_profile_report(); !ops.empty())
      std::printf("video decode %s, device time per op over %d decodes (H3_CUDA_PROFILE):\n%s", s.str().c_str(),
                  o_.reps_video, ops.c_str());
    const double med = median(wall);
    const double target = s.w * s.h > 864 * 480 ? kTargetVideo1344Seconds : kTargetVideo864Seconds;
    const MemoryStats m = be.memory_stats();
    std::printf("video decode %s: latents %s -> video %s: %.3f s wall (median of %d; device %.3f s), peak %s  "
                "target <= %.1f s: %s\n",
                s.str().c_str(), shape_str(z.shape()).c_str(), shape_str(out.shape()).c_str(), med, o_.reps_video,
                median(dev), format_gb(m.peak).c_str(), target,
                o_.tiny ? "n/a (tiny)" : med <= target ? "met" : "NOT MET");
    emit_json(cat("\"bench\":\"video_decode\",\"shape\":\"", s.str(), "\",\"median_s\":", med, ",\"wall_s\":",
                  json_list(wall), ",\"device_s\":", json_list(dev), ",\"peak_GB\":", m.peak / 1e9,
                  ",\"ok\":", inspect(out).ok() ? "true" : "false"));
  }

  void generate(Backend& be, Engine& engine, const Shape3& s) {
    GenerationRequest r;
    r.prompt = prompt_of_tokens(*tokenizer_, kConditionerTokens, "shot " + s.str() + ":");  // no prompt-cache hit
    r.width = s.w;
    r.height = s.h;
    r.frames = s.f;
    r.steps = o_.passes;
    r.seed = o_.seed;
    std::printf("generation %s, %lld passes; memory plan:\n", s.str().c_str(), (long long)o_.passes);
    std::string plan = engine.memory_plan(r);
    for (size_t at = 0; at < plan.size();) {
      const size_t nl = plan.find('\n', at);
      std::printf("    %s\n", plan.substr(at, nl - at).c_str());
      at = nl == std::string::npos ? plan.size() : nl + 1;
    }
    std::vector<Clock::time_point> pass_done;
    GenerateCallbacks cb;
    cb.on_pass = [&](const PassProgress&) { pass_done.push_back(Clock::now()); };
    be.reset_peak_memory();
    const auto t0 = Clock::now();
    GenerationResult out = engine.generate(r, cb);
    const double total = seconds_since(t0);
    const MemoryStats m = be.memory_stats();
    std::vector<double> per_pass;
    for (size_t i = 1; i < pass_done.size(); ++i)
      per_pass.push_back(std::chrono::duration<double>(pass_done[i] - pass_done[i - 1]).count());
    // The engine measures each phase's peak from a reset of its own, so the generation's peak is the largest of them
    // (the allocator's high-water mark now covers only the last phase).
    uint64_t peak = m.peak;
    for (const PhaseTiming& t : out.timings) peak = std::max<uint64_t>(peak, t.peak_device_bytes);
    std::printf("generation %s: %lld prompt tokens, total %.2f s, peak device memory %s (target <= %s: %s)\n",
                s.str().c_str(), (long long)out.prompt_tokens, total, format_gb(peak).c_str(),
                format_gb(static_cast<uint64_t>(kTargetPeakBytes)).c_str(),
                o_.tiny ? "n/a (tiny)" : peak <= kTargetPeakBytes ? "met" : "NOT MET");
    std::string phases;
    for (const PhaseTiming& t : out.timings) {
      std::printf("  %-13s wall %8.3f s  device %8.3f s  peak %s\n", phase_name(t.phase), t.wall_seconds,
                  t.device_seconds, format_gb(t.peak_device_bytes).c_str());
      phases += cat(phases.empty() ? "" : ",", "\"", phase_name(t.phase), "\":{\"wall_s\":", t.wall_seconds,
                    ",\"device_s\":", t.device_seconds, ",\"peak_GB\":", t.peak_device_bytes / 1e9, "}");
    }
    if (!per_pass.empty())
      std::printf("  denoise per pass (between pass callbacks, after the first): median %.3f s\n", median(per_pass));
    check(cat("generated video ", s.str()).c_str(), inspect(out.video));
    check(cat("generated audio ", s.str()).c_str(), inspect(out.audio));
    emit_json(cat("\"bench\":\"pipeline\",\"shape\":\"", s.str(), "\",\"passes\":", o_.passes,
                  ",\"prompt_tokens\":", out.prompt_tokens, ",\"total_s\":", total, ",\"phases\":{", phases,
                  "},\"denoise_per_pass_s\":", json_list(per_pass), ",\"peak_GB\":", peak / 1e9,
                  ",\"video_ok\":", inspect(out.video).ok() ? "true" : "false",
                  ",\"audio_ok\":", inspect(out.audio).ok() ? "true" : "false"));
  }

  Options o_;
  const Tokenizer* tokenizer_ = nullptr;  // owned by the engine
  int failures_ = 0;
};

}  // namespace

int tool_bench_pipeline(int argc, char** argv) {
  Options o;
  bool shapes_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next_int = [&](int64_t lo, int64_t& v) {
      if (i + 1 >= argc) return false;
      char* end = nullptr;
      v = std::strtoll(argv[++i], &end, 10);
      return end && !*end && v >= lo;
    };
    int64_t v = 0;
    if (a == "--device" && i + 1 < argc) {
      o.device = argv[++i];
    } else if (a == "--tiny") {
      o.tiny = true;
    } else if (a == "--shapes" && i + 1 < argc) {
      if (!parse_shapes(argv[++i], o.shapes)) return usage("--shapes takes WxHxF[,WxHxF...]");
      shapes_given = true;
    } else if (a == "--passes") {
      if (!next_int(2, v)) return usage("--passes must be an integer >= 2");
      o.passes = v;
    } else if (a == "--reps-conditioner" || a == "--reps-video" || a == "--reps-audio") {
      if (!next_int(1, v)) return usage("repetition counts must be integers >= 1");
      (a == "--reps-conditioner" ? o.reps_conditioner : a == "--reps-video" ? o.reps_video : o.reps_audio) =
          static_cast<int>(v);
    } else if (a == "--skip-isolated") {
      o.isolated = false;
    } else if (a == "--skip-generation") {
      o.generation = false;
    } else if (a == "--seed") {
      if (!next_int(0, v)) return usage("--seed must be a non-negative integer");
      o.seed = static_cast<uint64_t>(v);
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: bench-pipeline [--device cuda|cpu] [--tiny] [--shapes WxHxF,...] [--passes N]\n"
                  "       [--reps-conditioner N] [--reps-video N] [--reps-audio N] [--skip-isolated]\n"
                  "       [--skip-generation] [--seed N]\n");
      return 0;
    } else {
      return usage(cat("unexpected argument '", a, "'").c_str());
    }
  }
  if (!shapes_given)
    o.shapes = o.tiny ? std::vector<std::array<int64_t, 3>>{{64, 64, 22}, {96, 64, 39}}
                      : std::vector<std::array<int64_t, 3>>{{864, 480, 124}, {1344, 768, 124}};
  if (!o.tiny && o.device != "cuda")
    return usage("the released sizes need --device cuda (use --tiny for a run on the CPU)");
  if (o.device == "cuda" && !cuda_backend_available()) {
    std::printf("bench-pipeline: no CUDA device (%s); nothing measured\n", describe(detect_compute_device()).c_str());
    return 0;
  }
  try {
    return Bench(o).run();
  } catch (const Error& e) {
    std::fprintf(stderr, "h3 tool bench-pipeline: %s\n", e.what());
    return 1;
  }
}

}  // namespace h3

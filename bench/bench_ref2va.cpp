// ref2va's acceptance on the GPU (issue 15), h3's side; the reference's is tools/reference/peer_audio_encoder.py
// (and, optionally, tools/reference/peer_ref2va_dit.py), the ratios tools/reference/ref2va_ratios.py — all in one run
// through scripts/gpu/run.sh --ref2va-bench.
//
// (a) The audio VAE encode of a reference soundtrack: AudioVaeEncoder::random at the released config (random weights
//     made on the device), encode_reference of a --audio-seconds (15) stereo 32 kHz waveform of non-zero samples
//     (sines plus noise): the host check, the upload, the encode and the normalized rows back on the host. Median of
//     --reps-audio device-time intervals (CUDA events on the CUDA backend) after 2 warm-ups.
//     --conv-report (CUDA): then every 1-D convolution shape the encodes ran, timed every way cuDNN and h3 can run
//     it (cuda_conv1d_report: the legacy API's algorithm, the graph heuristic's first engine, the autotuned engine,
//     the same channels-last, h3's f32 kernel) with what served the encodes, and each way's total per encode.
//     With H3_CUDA_PROFILE=1 the per-op table names each convolution's shape and what served it.
// (b) The DiT (released size, random weights, AdaLN projections streamed: random_dit) on two packed sequences of one
//     --canvas (864x480x124): t2va, and ref2va with one image reference and one video reference with its soundtrack,
//     their layouts from build_layout and their per-pass timesteps from the request's schedules (TimestepPlan); the
//     same prompt in both. Per pass: one Dit::step (host rows in and out), device time, median of --passes after
//     --warmup passes. With --padded also t2va with its text padded to ref2va's length (what ref2va costs beyond its
//     longer sequence).
//
// The ref2va geometry follows the reference's rules (diffusers modular_pipelines/minimax_h3):
//   image reference  MiniMaxH3Ref2VASetupStep: scale = reference_image_short_edge / min(w, h), each side
//                    max(32, round(side · scale / 32) · 32) (a 1920x1080 photo → 3648x2048); the VAE's latent of that
//                    picture (one latent frame).
//   video reference  its own aspect on resolve_canvas_size(canvas_short_edge, canvas_max_pixels) (1920x1080 →
//                    1344x768), --video-seconds at 24 fps truncated to the generated frame count, then snapped DOWN to
//                    17n+5 for the VAE encode (MiniMaxH3Ref2VAReferenceEncoderStep: 120 → 107 frames, 32 latent
//                    frames).
//   soundtrack       --soundtrack-seconds (the video's length) truncated to int(frames / 24 · 32000) samples, one audio
//                    latent per 800 samples (⌈S / hop⌉) and channel: clean rows at t = 1.
//   text rows        present_ref2va: "<Audio 1>: ", "<Picture 1>: " + a vision block of the photo's image grid (the
//                    release's image processor: smart_resize within [65536, 16777216] pixels), "<Video 1>: " + per
//                    temporal block its timestamp label and a block of video tokens (the frames Qwen reads at 2 fps,
//                    sample_video_condition_frames; the release's video processor: video_smart_resize within [4096,
//                    25165824]), then the prompt. Tokenized with h3's tiny byte-level BPE (the one bench_pipeline
//                    uses), not Qwen's: the labels' and the prompt's token counts differ from Qwen's by a few tokens
//                    each; the vision blocks (nearly every text row) are exact.
//
// --export-layouts DIR writes DIR/{t2va,ref2va}.safetensors (token_tags, position_ids f64, the three index sets, the
// distinct timesteps of the first measured pass and every row's index into them) for peer_ref2va_dit.py, which
// runs the reference's transformer on exactly these sequences.
//
//   bench_ref2va [--device cuda|cpu] [--tiny] [--canvas WxHxF] [--image WxH] [--video WxH] [--video-seconds S]
//                [--soundtrack-seconds S] [--prompt-tokens N] [--audio-seconds S] [--reps-audio N] [--warmup N]
//                [--passes N] [--padded] [--skip-audio] [--skip-dit] [--conv-report] [--export-layouts DIR]
//                [--seed N] [--dry-run]
//
// --dry-run: the geometry, the row counts and the planned memory at any size (released included) on any machine,
// nothing built or timed (with --export-layouts, the layout files too).
#include <algorithm>
#include <cfenv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "io/config.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae_encoder.h"
#include "models/dit/dit.h"
#include "models/dit/dit_random.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/video_processor.h"
#include "pipeline/engine_parts.h"
#include "pipeline/geometry.h"
#include "pipeline/keyframes.h"
#include "pipeline/layout.h"
#include "pipeline/memory_plan.h"
#include "pipeline/sampler.h"
#include "text/prompt.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"
#include "util/error.h"

using namespace h3;

namespace {

// The acceptance (issue 15): the audio VAE encode of a 15 s reference at most this fraction of the reference's.
constexpr double kTargetAudioEncodeRatio = 0.5;
constexpr double kVideoSampleFps = 2.0;  // MiniMaxH3Ref2VATextEncoderStep's video_sample_fps
constexpr int64_t kAudioWarmups = 2;

struct Options {
  std::string device = "cuda";
  bool tiny = false;
  int64_t width = 864, height = 480, frames = 124;
  int64_t image_w = 1920, image_h = 1080;
  int64_t video_w = 1920, video_h = 1080;
  double video_seconds = 5.0;
  double soundtrack_seconds = -1;  // the video's
  int64_t prompt_tokens = 300;
  double audio_seconds = 15.0;
  int reps_audio = 10;
  int warmup = 1, passes = 3;
  bool padded = false, audio = true, dit = true;
  bool dry_run = false;  // the geometry, the rows and the planned memory at any size, on any machine; nothing timed
  bool conv_report = false;  // after the audio encode: its convolutions' shapes timed every way (CUDA)
  std::string export_dir;
  uint64_t seed = 1;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string json_list(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += cat(i ? "," : "", v[i]);
  return s + "]";
}

const char* json_bool(bool b) { return b ? "true" : "false"; }

void emit_json(const std::string& body) {
  std::printf("JSON {%s}\n", body.c_str());
  std::fflush(stdout);
}

// Python's round() of a double (ties to even), as the reference rounds the image sides.
int64_t python_round(double x) {
  const int mode = std::fegetround();
  std::fesetround(FE_TONEAREST);
  const double r = std::nearbyint(x);
  std::fesetround(mode);
  return static_cast<int64_t>(r);
}

// Device time of fn() between marks before and after (CUDA events on the CUDA backend).
template <class F>
double device_time(Backend& be, F&& fn) {
  be.synchronize();
  const auto d0 = be.mark_time();
  fn();
  const auto d1 = be.mark_time();
  be.synchronize();
  return be.device_seconds(*d0, *d1);
}

struct Check {
  bool finite = true, varies = false;
  bool ok() const { return finite && varies; }
};

Check inspect(const Tensor& t) {
  Check c;
  const Tensor f = t.dtype() == DType::F32 ? t : t.to(DType::F32);
  const float* p = f.ptr<float>();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    if (!std::isfinite(p[i])) {
      c.finite = false;
      continue;
    }
    if (i == 0 || p[i] < lo) lo = p[i];
    if (i == 0 || p[i] > hi) hi = p[i];
  }
  c.varies = hi > lo;
  return c;
}

Tensor host_randn(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::F32);
  random_normal_host(t, seed, 0.f, 1.f);
  return t;
}

// Audio-like stereo samples: a sine per channel plus noise, |x| < 1 (never zeros).
Tensor test_waveform(int64_t channels, int64_t samples, int64_t rate, uint64_t seed) {
  std::mt19937 g(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::normal_distribution<float> n(0.f, 0.05f);
  Tensor w = Tensor::empty({channels, samples}, DType::F32);
  for (int64_t c = 0; c < channels; ++c) {
    const float f = 200.f + 3000.f * u(g), ph = 6.f * u(g);
    for (int64_t t = 0; t < samples; ++t)
      w.ptr<float>()[c * samples + t] =
          0.5f * std::sin(6.2831853f * f * static_cast<float>(t) / static_cast<float>(rate) + ph) + n(g);
  }
  return w;
}

const char* const kPromptWords[] = {"a",     "red", "fox",    "walks", "through", "fresh", "snow",  "under",
                                    "a",     "pale", "winter", "sky",   "while",   "wind",  "moves", "the",
                                    "pines", "and", "a",      "river", "runs",    "past",  "stone", "banks"};

// Whole words until the prompt has at least `tokens` tokens under `tok`.
std::string prompt_of_tokens(const Tokenizer& tok, int64_t tokens) {
  std::string p = "ref2va bench:";
  for (size_t i = 0; static_cast<int64_t>(tok.encode(p).size()) < tokens; ++i)
    p += std::string(" ") + kPromptWords[i % std::size(kPromptWords)];
  return p;
}

// The release's processor/ video settings (spec/layout.md §2.4).
VideoProcessorConfig released_video_processor() {
  VideoProcessorConfig v;
  v.patch_size = 16;
  v.temporal_patch_size = 2;
  v.merge_size = 2;
  v.min_pixels = 4096;
  v.max_pixels = 25165824;
  v.image_mean = {0.5, 0.5, 0.5};
  v.image_std = {0.5, 0.5, 0.5};
  return v;
}

// Everything the two packed sequences are built from.
struct Plan {
  LatentGeometry target;
  // Image reference.
  int64_t image_enc_w = 0, image_enc_h = 0;
  ImageGrid image_grid;
  // Video reference.
  int64_t video_canvas_w = 0, video_canvas_h = 0, video_frames_in = 0, video_frames_kept = 0, video_frames_encoded = 0;
  ImageGrid video_grid;
  std::vector<double> video_block_timestamps;
  int64_t soundtrack_samples = 0;
  // Blocks and presentations.
  std::vector<ReferenceBlock> references;
  Presentation t2va, ref2va;
  int64_t image_tokens = 0, video_tokens = 0;  // vision blocks' pads, start and end tokens included
};

Plan make_plan(const Options& o, const ComponentConfigs& cfg, const CanvasConfig& canvas,
               const VideoProcessorConfig& video_processor, const Tokenizer& tok) {
  const DitConfig& d = cfg.dit;
  const int64_t sr = cfg.vae.spatial_ratio(), multiple = sr * d.patch_size[1];
  Plan p;
  p.target = LatentGeometry::make(o.width, o.height, align_frame_count(o.frames), d.patch_size, d.in_channels,
                                  d.audio_in_channels, sr);
  const int64_t frames = p.target.frames;

  // The image reference: its own short edge, upscaling included, no area cap.
  const double scale = static_cast<double>(canvas.reference_image_short_edge) /
                       static_cast<double>(std::min(o.image_w, o.image_h));
  p.image_enc_h = std::max(multiple, python_round(static_cast<double>(o.image_h) * scale / multiple) * multiple);
  p.image_enc_w = std::max(multiple, python_round(static_cast<double>(o.image_w) * scale / multiple) * multiple);
  ReferenceBlock image;
  image.kind = ReferenceBlock::Kind::Image;
  image.latent_frames = 1;
  image.latent_height = p.image_enc_h / sr;
  image.latent_width = p.image_enc_w / sr;
  const ImageProcessorConfig& ip = cfg.image_processor;
  const auto [ih, iw] = smart_resize(p.image_enc_h, p.image_enc_w, ip.factor(), ip.min_pixels, ip.max_pixels);
  p.image_grid = {1, ih / ip.patch_size, iw / ip.patch_size};

  // The video reference: 24 fps, truncated to the generated frames, on the canvas of its own aspect.
  const CanvasSize vc = resolve_canvas_size(static_cast<double>(o.video_w), static_cast<double>(o.video_h), multiple,
                                            canvas.canvas_short_edge, canvas.canvas_max_pixels, "the video reference");
  p.video_canvas_w = vc.width;
  p.video_canvas_h = vc.height;
  p.video_frames_in = static_cast<int64_t>(std::llround(o.video_seconds * kFps));
  p.video_frames_kept = std::min(p.video_frames_in, frames);
  p.video_frames_encoded =
      std::max<int64_t>(1, (p.video_frames_kept - kVaeLatentsPerChunk) / kVaeFramesPerChunk) * kVaeFramesPerChunk +
      kVaeLatentsPerChunk;
  H3_CHECK(p.video_frames_encoded <= p.video_frames_kept, "a video reference of ", p.video_frames_kept,
           " frames is shorter than the VAE's shortest clip (", p.video_frames_encoded, " frames)");
  const double sound_s = o.soundtrack_seconds >= 0 ? o.soundtrack_seconds : o.video_seconds;
  const int64_t rate = cfg.audio.sampling_rate;
  const auto max_samples = static_cast<int64_t>(static_cast<double>(frames) / static_cast<double>(kFps) *
                                                static_cast<double>(rate));  // int(max_duration · sample_rate)
  p.soundtrack_samples = std::min(static_cast<int64_t>(std::llround(sound_s * static_cast<double>(rate))), max_samples);
  const int64_t hop = cfg.audio.hop_length();
  ReferenceBlock video;
  video.kind = ReferenceBlock::Kind::Video;
  video.latent_frames = latent_frame_count(p.video_frames_encoded);
  video.latent_height = p.video_canvas_h / sr;
  video.latent_width = p.video_canvas_w / sr;
  video.audio_latents = (p.soundtrack_samples + hop - 1) / hop;
  p.references = {image, video};

  // What the conditioner reads of the video: the normalized (kept) frames at 2 fps.
  const VideoConditionFrames vf = sample_video_condition_frames(p.video_frames_kept, static_cast<double>(kFps),
                                                                kVideoSampleFps, video_processor.temporal_patch_size);
  const int64_t sampled = static_cast<int64_t>(vf.indices.size());
  const auto [vh, vw] = video_smart_resize(sampled, p.video_canvas_h, p.video_canvas_w,
                                           video_processor.temporal_patch_size, video_processor.factor(),
                                           video_processor.min_pixels, video_max_pixels(video_processor, sampled));
  const int64_t tp = video_processor.temporal_patch_size;
  p.video_grid = {(sampled + tp - 1) / tp, vh / video_processor.patch_size, vw / video_processor.patch_size};
  p.video_block_timestamps = vf.block_timestamps;

  const std::string prompt = prompt_of_tokens(tok, o.prompt_tokens);
  p.t2va = present_t2va(tok, prompt);
  Ref2vaReference ri, rv;
  ri.kind = Ref2vaReference::Kind::Image;
  ri.grid = p.image_grid;
  rv.kind = Ref2vaReference::Kind::Video;
  rv.has_audio = true;
  rv.grid = p.video_grid;
  rv.block_timestamps = p.video_block_timestamps;
  p.ref2va = present_ref2va(tok, prompt, {ri, rv}, ip.merge_size);
  p.image_tokens = p.image_grid.tokens(ip.merge_size) + 2;
  p.video_tokens = p.video_grid.t * (p.video_grid.tokens(video_processor.merge_size) / p.video_grid.t + 2);
  return p;
}

// The layout's rows by role.
struct RowCounts {
  int64_t L = 0, text = 0, condition_video = 0, reference_audio = 0, target_video = 0, target_audio = 0;
  std::string json() const {
    return cat("{\"L\":", L, ",\"text\":", text, ",\"condition_video\":", condition_video,
               ",\"reference_audio\":", reference_audio, ",\"target_audio\":", target_audio,
               ",\"target_video\":", target_video, "}");
  }
};

RowCounts count_rows(const PackedLayout& l) {
  RowCounts c;
  c.L = l.length();
  for (RowRole r : l.roles) {
    switch (r) {
      case RowRole::Text: ++c.text; break;
      case RowRole::ConditionVideo: ++c.condition_video; break;
      case RowRole::TargetVideo: ++c.target_video; break;
      case RowRole::ReferenceAudio: ++c.reference_audio; break;
      case RowRole::TargetAudio: ++c.target_audio; break;
    }
  }
  return c;
}

// The layout, one pass's timesteps in the reference's form, for peer_ref2va_dit.py.
void export_layout(const std::string& path, const PackedLayout& l, const PassTimesteps& t) {
  auto i64 = [](const std::vector<int64_t>& v) {
    Tensor x = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I64);
    std::copy(v.begin(), v.end(), x.ptr<int64_t>());
    return x;
  };
  Tensor ts = Tensor::from_f32({static_cast<int64_t>(t.values.size())}, t.values);
  Tensor pos = l.position_ids.dtype() == DType::F64 ? l.position_ids : l.position_ids.to(DType::F64);
  write_safetensors(path, {{"token_tags", i64(l.token_tags)},
                           {"position_ids", pos},
                           {"video_indices", i64(l.video_indices)},
                           {"audio_indices", i64(l.audio_indices)},
                           {"text_indices", i64(l.text_indices)},
                           {"timestep", ts},
                           {"timestep_indices", i64(t.indices)}});
}

struct PassRun {
  RowCounts rows;
  std::vector<double> warmup_s, pass_s;
  double begin_s = 0, per_pass_s = 0;
  uint64_t peak = 0, planned_workspace = 0;
  int64_t timesteps = 0;
  bool ok = true;
  std::string json() const {
    return cat("{\"rows\":", rows.json(), ",\"per_pass_s\":", per_pass_s, ",\"pass_s\":", json_list(pass_s),
               ",\"warmup_s\":", json_list(warmup_s), ",\"begin_request_s\":", begin_s, ",\"timesteps\":", timesteps,
               ",\"peak_GB\":", peak / 1e9, ",\"planned_workspace_GB\":", planned_workspace / 1e9,
               ",\"ok\":", json_bool(ok), "}");
  }
};

class Bench {
 public:
  explicit Bench(const Options& o) : o_(o) {}

  int run() {
    auto backend = make_backend(o_.device);
    Backend& be = *backend;
    std::printf("bench_ref2va: device %s, backend %s, %s configurations\n",
                describe(detect_compute_device()).c_str(), be.name().c_str(), o_.tiny ? "TINY" : "released");
    auto tok = std::make_unique<Tokenizer>(Tokenizer::from_json(make_tiny_tokenizer_json()));
    cfg_ = o_.tiny ? tiny_component_configs(static_cast<int64_t>(tok->vocab_size())) : released_component_configs();
    if (o_.tiny) {
      cfg_.audio.encoder_dim = 8;  // a CPU-sized trunk (the release's strides and hop)
      canvas_ = CanvasConfig{64, 64 * 112, 96};
    }
    if (o_.audio && !o_.dry_run) audio_encode(be);
    if (o_.dit) dit_passes(be, *tok);
    std::printf("bench_ref2va: %s\n", failures_ ? "SELF-CHECK FAILED" : "all self-checks passed");
    return failures_ ? 1 : 0;
  }

 private:
  void check(const std::string& what, bool ok) {
    std::printf("  self-check %s: %s\n", what.c_str(), ok ? "ok" : "FAILED");
    if (!ok) ++failures_;
  }

  // (a)
  void audio_encode(Backend& be) {
    const AudioVaeConfig& c = cfg_.audio;
    auto enc = AudioVaeEncoder::random(be, c, o_.seed + 7);
    const auto samples = static_cast<int64_t>(std::llround(o_.audio_seconds * static_cast<double>(c.sampling_rate)));
    const Tensor wave = test_waveform(2, samples, c.sampling_rate, o_.seed + 8);
    be.reset_peak_memory();
    Tensor rows;
    for (int64_t i = 0; i < kAudioWarmups; ++i) rows = enc->encode_reference(wave);  // plans, cuDNN algorithms
    const Check r = inspect(rows);
    check("audio encode rows finite and varied", r.ok());
    std::vector<double> dev;
    be.op_profile_report();  // drops the warm-ups'
    for (int i = 0; i < o_.reps_audio; ++i) dev.push_back(device_time(be, [&] { rows = enc->encode_reference(wave); }));
    if (const std::string ops = be.op_profile_report(); !ops.empty())
      std::printf("audio encode, device time per op over %d encodes (H3_CUDA_PROFILE):\n%s", o_.reps_audio,
                  ops.c_str());
    const MemoryStats m = be.memory_stats();
    const double med = median(dev);
    std::printf("audio VAE encode (encode_reference) of %.2f s stereo at %lld Hz (%lld samples) -> rows [%lld, %lld]: "
                "device %.2f ms (median of %d after %lld warm-ups; min %.2f, max %.2f), weights %s, planned working "
                "%s, peak %s  target <= %.1fx the reference's (peer_audio_encoder.py, same run)\n",
                o_.audio_seconds, (long long)c.sampling_rate, (long long)samples, (long long)rows.dim(0),
                (long long)rows.dim(1), med * 1e3, o_.reps_audio, (long long)kAudioWarmups,
                *std::min_element(dev.begin(), dev.end()) * 1e3, *std::max_element(dev.begin(), dev.end()) * 1e3,
                format_gb(AudioVaeEncoder::weight_bytes(c)).c_str(),
                format_gb(AudioVaeEncoder::working_bytes(c, 2, samples)).c_str(), format_gb(m.peak).c_str(),
                kTargetAudioEncodeRatio);
    emit_json(cat("\"bench\":\"audio_vae_encode\",\"tiny\":", json_bool(o_.tiny), ",\"seconds\":", o_.audio_seconds,
                  ",\"sampling_rate\":", c.sampling_rate, ",\"samples\":", samples, ",\"channels\":2,\"latents\":",
                  enc->latents_for(samples), ",\"rows\":[", rows.dim(0), ",", rows.dim(1), "],\"reps\":",
                  o_.reps_audio, ",\"warmups\":", kAudioWarmups, ",\"median_device_s\":", med, ",\"device_s\":",
                  json_list(dev), ",\"weights_GB\":", AudioVaeEncoder::weight_bytes(c) / 1e9, ",\"peak_GB\":",
                  m.peak / 1e9, ",\"target_ratio\":", kTargetAudioEncodeRatio, ",\"ok\":", json_bool(r.ok())));
    if (o_.conv_report) conv_report(be, kAudioWarmups + o_.reps_audio);
  }

  // --conv-report: the encodes' convolutions, every way (cuda_conv1d_report).
  void conv_report(Backend& be, int64_t encodes) {
#ifdef H3_HAVE_CUDA
    if (be.device() != Device::CUDA) {
      std::printf("conv report: needs the CUDA backend\n");
      return;
    }
    const CudaConvReport rep = cuda_conv1d_report(be, 3, encodes);
    std::printf("audio encode convolutions (%lld encodes):\n%s", (long long)encodes, rep.table.c_str());
    std::string ways;
    for (const auto& [way, ms] : rep.per_run_ms)
      ways += cat(ways.empty() ? "" : ",", "\"", way, "\":", ms < 0 ? std::string("null") : cat(ms / 1e3));
    emit_json(cat("\"bench\":\"audio_vae_encode_convolutions\",\"per_encode_s\":{", ways, "}"));
#else
    (void)be;
    (void)encodes;
    std::printf("conv report: this build has no CUDA backend\n");
#endif
  }

  // One packed sequence: begin_request, --warmup + --passes steps with the plan's per-pass timesteps.
  PassRun time_passes(Backend& be, Dit& dit, const std::string& label, const LayoutSpec& spec,
                      const std::string& export_name) {
    const DitConfig& d = cfg_.dit;
    const PackedLayout layout = build_layout(spec);
    const int64_t total = o_.warmup + o_.passes;
    const auto [video_s, audio_s] = make_schedules(total);
    const TimestepPlan plan = TimestepPlan::make(layout, video_s, audio_s);
    PassRun run;
    run.rows = count_rows(layout);
    run.timesteps = static_cast<int64_t>(plan.timesteps().size());
    run.planned_workspace = dit_step_workspace_bytes(d, be.activation_dtype(), run.rows.L, run.timesteps);
    if (!o_.export_dir.empty() && !export_name.empty())
      export_layout((std::filesystem::path(o_.export_dir) / (export_name + ".safetensors")).string(), layout,
                    reference_pass_timesteps(layout, plan, o_.warmup));
    const int64_t nv = static_cast<int64_t>(layout.video_indices.size());
    const int64_t na = static_cast<int64_t>(layout.audio_indices.size());
    const Tensor text = host_randn({layout.num_text(), d.text_dim}, o_.seed + 21);
    const Tensor video = host_randn({nv, d.patch_dim()}, o_.seed + 22);
    const Tensor audio = host_randn({na, d.audio_in_channels}, o_.seed + 23);
    DitLayout dl;
    dl.token_tags = layout.token_tags;
    dl.position_ids = layout.position_ids;
    dl.video_indices = layout.video_indices;
    dl.audio_indices = layout.audio_indices;
    dl.text_indices = layout.text_indices;
    be.reset_peak_memory();
    run.begin_s = device_time(be, [&] { dit.begin_request(dl, text, plan.timesteps()); });
    be.op_profile_report();
    for (int64_t i = 0; i < total; ++i) {
      DitOutput out;
      const std::vector<int64_t> idx = plan.row_indices(layout, i);
      const double t = device_time(be, [&] { out = dit.step(video, audio, idx); });
      (i < o_.warmup ? run.warmup_s : run.pass_s).push_back(t);
      if (i == total - 1) run.ok = inspect(out.sample).ok() && inspect(out.audio_sample).ok();
    }
    dit.end_request();
    if (const std::string ops = be.op_profile_report(); !ops.empty())
      std::printf("%s, device time per op over %lld passes (H3_CUDA_PROFILE):\n%s", label.c_str(),
                  (long long)total, ops.c_str());
    run.peak = be.memory_stats().peak;
    run.per_pass_s = median(run.pass_s);
    check(label + " output finite and varied", run.ok);
    std::printf("  %s: L %lld (text %lld, conditioning video %lld, reference audio %lld, target audio %lld, target "
                "video %lld), %lld timesteps: %.4f s per pass (median of %d after %d; begin_request %.3f s), peak %s "
                "(planned step workspace %s)\n",
                label.c_str(), (long long)run.rows.L, (long long)run.rows.text, (long long)run.rows.condition_video,
                (long long)run.rows.reference_audio, (long long)run.rows.target_audio,
                (long long)run.rows.target_video, (long long)run.timesteps, run.per_pass_s, o_.passes, o_.warmup,
                run.begin_s, format_gb(run.peak).c_str(), format_gb(run.planned_workspace).c_str());
    return run;
  }

  // --dry-run --export-layouts: the layout files alone (what peer_ref2va_dit.py reads), as time_passes writes them.
  void export_layout_only(const LayoutSpec& spec, const std::string& name) {
    const PackedLayout layout = build_layout(spec);
    const auto [video_s, audio_s] = make_schedules(o_.warmup + o_.passes);
    const TimestepPlan plan = TimestepPlan::make(layout, video_s, audio_s);
    export_layout((std::filesystem::path(o_.export_dir) / (name + ".safetensors")).string(), layout,
                  reference_pass_timesteps(layout, plan, o_.warmup));
  }

  // (b)
  void dit_passes(Backend& be, const Tokenizer& tok) {
    const DitConfig& d = cfg_.dit;
    const Plan p = make_plan(o_, cfg_, canvas_, released_video_processor(), tok);
    const ReferenceBlock &img = p.references[0], &vid = p.references[1];
    const int64_t pr = d.patch_size[1] * d.patch_size[2];
    const int64_t image_rows = img.latent_frames * img.latent_height * img.latent_width / pr;
    const int64_t video_rows = vid.latent_frames * vid.latent_height * vid.latent_width / pr;
    std::printf("ref2va on %lldx%lldx%lld:\n"
                "  image reference: a %lldx%lld photo encoded at %lldx%lld (short edge %lld) -> latent %lldx%lld, "
                "%lld rows; its vision block: grid (%lld, %lld, %lld), %lld tokens\n"
                "  video reference: %.2f s of %lldx%lld at 24 fps -> %lld frames kept, on the %lldx%lld canvas, "
                "%lld encoded -> %lld latent frames of %lldx%lld, %lld rows; Qwen reads %lld frames at 2 fps: grid "
                "(%lld, %lld, %lld), %lld tokens in %zu blocks\n"
                "  soundtrack: %lld samples at %lld Hz -> %lld latents x 2 channels = %lld rows\n"
                "  target: %lld latent frames of %lldx%lld, %lld video rows, %lld audio rows\n",
                (long long)o_.width, (long long)o_.height, (long long)p.target.frames, (long long)o_.image_w,
                (long long)o_.image_h, (long long)p.image_enc_w, (long long)p.image_enc_h,
                (long long)canvas_.reference_image_short_edge, (long long)img.latent_width,
                (long long)img.latent_height, (long long)image_rows, (long long)p.image_grid.t,
                (long long)p.image_grid.h, (long long)p.image_grid.w, (long long)p.image_tokens, o_.video_seconds,
                (long long)o_.video_w, (long long)o_.video_h, (long long)p.video_frames_kept,
                (long long)p.video_canvas_w, (long long)p.video_canvas_h, (long long)p.video_frames_encoded,
                (long long)vid.latent_frames, (long long)vid.latent_width, (long long)vid.latent_height,
                (long long)video_rows, (long long)(p.video_grid.t * 2), (long long)p.video_grid.t,
                (long long)p.video_grid.h, (long long)p.video_grid.w, (long long)p.video_tokens,
                p.video_block_timestamps.size(), (long long)p.soundtrack_samples,
                (long long)cfg_.audio.sampling_rate, (long long)vid.audio_latents, (long long)(2 * vid.audio_latents),
                (long long)p.target.latent_frames, (long long)p.target.latent_width,
                (long long)p.target.latent_height, (long long)p.target.video_rows(),
                (long long)p.target.audio_rows());
    const int64_t prompt_rows = static_cast<int64_t>(p.t2va.ids.size());
    const int64_t ref_text = static_cast<int64_t>(p.ref2va.ids.size());
    const int64_t label_rows = ref_text - prompt_rows - p.image_tokens - p.video_tokens;
    std::printf("  text rows: t2va %lld (the prompt), ref2va %lld (image block %lld, video blocks %lld, labels %lld, "
                "prompt %lld)\n",
                (long long)prompt_rows, (long long)ref_text, (long long)p.image_tokens, (long long)p.video_tokens,
                (long long)label_rows, (long long)prompt_rows);
    if (!o_.export_dir.empty()) std::filesystem::create_directories(o_.export_dir);

    LayoutSpec t2va;
    t2va.text_tags = p.t2va.tags;
    t2va.target = p.target;
    LayoutSpec ref2va = t2va;
    ref2va.text_tags = p.ref2va.tags;
    ref2va.references = p.references;
    const int64_t l_t2va = build_layout(t2va).length(), l_ref = build_layout(ref2va).length();
    if (o_.dry_run) {
      const DType act = o_.tiny ? DType::F32 : DType::BF16;  // the CPU's activations, the CUDA backend's
      const uint64_t resident = dit_resident_bytes(d, act, false);
      const uint64_t ws = dit_step_workspace_bytes(d, act, l_ref, 8);
      std::printf("dry run (nothing timed): L t2va %lld, ref2va %lld (+%lld rows, %.1f%% of ref2va's L); planned "
                  "DiT weights %s + one ref2va step's workspace %s = %s\n",
                  (long long)l_t2va, (long long)l_ref, (long long)(l_ref - l_t2va),
                  100.0 * static_cast<double>(l_ref - l_t2va) / static_cast<double>(l_ref), format_gb(resident).c_str(),
                  format_gb(ws).c_str(), format_gb(resident + ws).c_str());
      emit_json(cat("\"bench\":\"ref2va_plan\",\"L_t2va\":", l_t2va, ",\"L_ref2va\":", l_ref,
                    ",\"image_rows\":", image_rows, ",\"video_rows\":", video_rows, ",\"reference_audio_rows\":",
                    2 * vid.audio_latents, ",\"text_t2va\":", prompt_rows, ",\"text_ref2va\":", ref_text,
                    ",\"dit_resident_GB\":", resident / 1e9, ",\"step_workspace_GB\":", ws / 1e9));
      if (!o_.export_dir.empty()) {
        export_layout_only(t2va, "t2va");
        export_layout_only(ref2va, "ref2va");
      }
      return;
    }

    uint64_t resident = 0;
    const auto t_build = std::chrono::steady_clock::now();
    dit_ = random_dit(be, d, RandomDitOptions{o_.seed + 1000, false, false}, &resident);
    be.synchronize();
    const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();
    const MemoryStats m0 = be.memory_stats();
    std::printf("DiT (%lld blocks) with random weights made in %.1f s: resident %s, allocator %s, device %s used of "
                "%s\n",
                (long long)d.num_layers, build_s, format_gb(resident).c_str(), format_gb(m0.in_use).c_str(),
                format_gb(m0.device_total - m0.device_free).c_str(), format_gb(m0.device_total).c_str());

    // Planned memory before running: the weights plus the longer sequence's step workspace.
    const uint64_t need = resident + dit_step_workspace_bytes(d, be.activation_dtype(), l_ref, 8);
    const bool fits = m0.device_total == 0 || need < m0.device_total;
    std::printf("  planned: weights %s + one ref2va step's workspace at L %lld %s = %s of %s: %s\n",
                format_gb(resident).c_str(), (long long)l_ref,
                format_gb(dit_step_workspace_bytes(d, be.activation_dtype(), l_ref, 8)).c_str(),
                format_gb(need).c_str(), m0.device_total ? format_gb(m0.device_total).c_str() : "(host)",
                fits ? "fits" : "DOES NOT FIT");
    if (!fits) ++failures_;

    const PassRun a = time_passes(be, *dit_, "t2va", t2va, "t2va");
    const PassRun b = time_passes(be, *dit_, "ref2va", ref2va, "ref2va");
    PassRun c;
    if (o_.padded) {
      LayoutSpec padded = t2va;
      padded.text_tags.assign(static_cast<size_t>(prompt_rows + (b.rows.L - a.rows.L)), kTextTokenTag);
      c = time_passes(be, *dit_, "t2va padded to ref2va's length", padded, "");
      check("padded length equals ref2va's", c.rows.L == b.rows.L);
    }
    const int64_t extra = b.rows.L - a.rows.L;
    const int64_t extra_text = b.rows.text - a.rows.text;
    const double share = static_cast<double>(extra) / static_cast<double>(b.rows.L);
    const double ratio = b.per_pass_s / a.per_pass_s;
    std::printf("ref2va %s: per pass t2va %.4f s (L %lld), ref2va %.4f s (L %lld): ratio %.3f\n"
                "  ref2va adds %lld rows, %.1f%% of its L: %lld text (vision blocks and labels), %lld image-reference, "
                "%lld video-reference, %lld reference-audio rows\n",
                (std::to_string(o_.width) + "x" + std::to_string(o_.height) + "x" + std::to_string(p.target.frames))
                    .c_str(),
                a.per_pass_s, (long long)a.rows.L, b.per_pass_s, (long long)b.rows.L, ratio, (long long)extra,
                100 * share, (long long)extra_text, (long long)image_rows, (long long)video_rows,
                (long long)b.rows.reference_audio);
    if (o_.padded)
      std::printf("  t2va padded to L %lld: %.4f s per pass; ref2va / padded %.3f\n", (long long)c.rows.L,
                  c.per_pass_s, b.per_pass_s / c.per_pass_s);
    emit_json(cat(
        "\"bench\":\"ref2va_passes\",\"tiny\":", json_bool(o_.tiny), ",\"shape\":\"", o_.width, "x", o_.height, "x",
        p.target.frames, "\",\"warmup\":", o_.warmup, ",\"passes\":", o_.passes, ",\"dit_resident_GB\":",
        resident / 1e9, ",\"dit_build_s\":", build_s, ",\"image\":{\"photo\":[", o_.image_w, ",", o_.image_h,
        "],\"encoded\":[", p.image_enc_w, ",", p.image_enc_h, "],\"latent\":[", img.latent_height, ",",
        img.latent_width, "],\"rows\":", image_rows, ",\"grid_thw\":[", p.image_grid.t, ",", p.image_grid.h, ",",
        p.image_grid.w, "],\"tokens\":", p.image_tokens, "},\"video\":{\"source\":[", o_.video_w, ",", o_.video_h,
        "],\"seconds\":", o_.video_seconds, ",\"canvas\":[", p.video_canvas_w, ",", p.video_canvas_h,
        "],\"frames_kept\":", p.video_frames_kept, ",\"frames_encoded\":", p.video_frames_encoded,
        ",\"latent\":[", vid.latent_frames, ",", vid.latent_height, ",", vid.latent_width, "],\"rows\":", video_rows,
        ",\"grid_thw\":[", p.video_grid.t, ",", p.video_grid.h, ",", p.video_grid.w, "],\"tokens\":", p.video_tokens,
        ",\"soundtrack_samples\":", p.soundtrack_samples, ",\"audio_latents\":", vid.audio_latents,
        "},\"text\":{\"prompt\":", prompt_rows, ",\"ref2va\":", ref_text, ",\"labels\":", label_rows,
        ",\"tokenizer\":\"tiny\"},\"t2va\":", a.json(), ",\"ref2va\":", b.json(),
        o_.padded ? cat(",\"t2va_padded\":", c.json()) : std::string(), ",\"extra_rows\":", extra,
        ",\"extra_text_rows\":", extra_text, ",\"extra_image_rows\":", image_rows, ",\"extra_video_rows\":",
        video_rows, ",\"extra_reference_audio_rows\":", b.rows.reference_audio, ",\"extra_row_share\":", share,
        ",\"ref2va_over_t2va\":", ratio,
        o_.padded ? cat(",\"ref2va_over_t2va_padded\":", b.per_pass_s / c.per_pass_s) : std::string(),
        ",\"fits\":", json_bool(fits)));
    dit_.reset();
  }

  Options o_;
  ComponentConfigs cfg_;
  CanvasConfig canvas_;
  std::unique_ptr<Dit> dit_;
  int failures_ = 0;
};

int usage(const char* msg) {
  std::fprintf(stderr,
               "bench_ref2va: %s\n"
               "usage: bench_ref2va [--device cuda|cpu] [--tiny] [--canvas WxHxF] [--image WxH] [--video WxH]\n"
               "       [--video-seconds S] [--soundtrack-seconds S] [--prompt-tokens N] [--audio-seconds S]\n"
               "       [--reps-audio N] [--warmup N] [--passes N] [--padded] [--skip-audio] [--skip-dit]\n"
               "       [--conv-report] [--export-layouts DIR] [--seed N] [--dry-run]\n",
               msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool canvas_given = false, audio_seconds_given = false, video_seconds_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    auto pair = [&](int64_t& w, int64_t& h) {
      long long x = 0, y = 0;
      return has && std::sscanf(argv[++i], "%lldx%lld", &x, &y) == 2 && x > 0 && y > 0 && ((w = x), (h = y), true);
    };
    auto number = [&](double lo, double& v) {
      if (!has) return false;
      char* end = nullptr;
      v = std::strtod(argv[++i], &end);
      return end && !*end && v >= lo;
    };
    auto integer = [&](long long lo, long long& v) {
      if (!has) return false;
      char* end = nullptr;
      v = std::strtoll(argv[++i], &end, 10);
      return end && !*end && v >= lo;
    };
    long long n = 0;
    if (a == "--device" && has) {
      o.device = argv[++i];
    } else if (a == "--tiny") {
      o.tiny = true;
    } else if (a == "--canvas") {
      long long w = 0, h = 0, f = 0;
      if (!has || std::sscanf(argv[++i], "%lldx%lldx%lld", &w, &h, &f) != 3 || w <= 0 || h <= 0 || f <= 0)
        return usage("--canvas takes WxHxF");
      o.width = w, o.height = h, o.frames = f;
      canvas_given = true;
    } else if (a == "--image") {
      if (!pair(o.image_w, o.image_h)) return usage("--image takes WxH");
    } else if (a == "--video") {
      if (!pair(o.video_w, o.video_h)) return usage("--video takes WxH");
    } else if (a == "--video-seconds") {
      if (!number(0.1, o.video_seconds)) return usage("--video-seconds takes a number >= 0.1");
      video_seconds_given = true;
    } else if (a == "--soundtrack-seconds") {
      if (!number(0.01, o.soundtrack_seconds)) return usage("--soundtrack-seconds takes a number >= 0.01");
    } else if (a == "--audio-seconds") {
      if (!number(0.01, o.audio_seconds)) return usage("--audio-seconds takes a number >= 0.01");
      audio_seconds_given = true;
    } else if (a == "--prompt-tokens") {
      if (!integer(1, n)) return usage("--prompt-tokens takes an integer >= 1");
      o.prompt_tokens = n;
    } else if (a == "--reps-audio") {
      if (!integer(1, n)) return usage("--reps-audio takes an integer >= 1");
      o.reps_audio = static_cast<int>(n);
    } else if (a == "--warmup") {
      if (!integer(0, n)) return usage("--warmup takes an integer >= 0");
      o.warmup = static_cast<int>(n);
    } else if (a == "--passes") {
      if (!integer(1, n)) return usage("--passes takes an integer >= 1");
      o.passes = static_cast<int>(n);
    } else if (a == "--dry-run") {
      o.dry_run = true;
    } else if (a == "--padded") {
      o.padded = true;
    } else if (a == "--skip-audio") {
      o.audio = false;
    } else if (a == "--skip-dit") {
      o.dit = false;
    } else if (a == "--conv-report") {
      o.conv_report = true;
    } else if (a == "--export-layouts" && has) {
      o.export_dir = argv[++i];
    } else if (a == "--seed") {
      if (!integer(0, n)) return usage("--seed takes a non-negative integer");
      o.seed = static_cast<uint64_t>(n);
    } else if (a == "-h" || a == "--help") {
      usage("the ref2va acceptance's h3 side (see the header of bench/bench_ref2va.cpp)");
      return 0;
    } else {
      return usage(cat("unexpected argument '", a, "'").c_str());
    }
  }
  if (o.tiny) {  // a CPU-sized request unless told otherwise
    if (!canvas_given) o.width = 64, o.height = 64, o.frames = 22;
    if (!video_seconds_given) o.video_seconds = 1.0;
    if (!audio_seconds_given) o.audio_seconds = 1.0;
  }
  if (o.dry_run) o.device = "cpu";  // nothing runs on the device
  if (!o.tiny && o.device != "cuda" && !o.dry_run) return usage("the released sizes need --device cuda (use --tiny on the CPU)");
  if (o.device == "cuda" && !cuda_backend_available()) {
    std::printf("bench_ref2va: no CUDA device (%s); nothing measured\n", describe(detect_compute_device()).c_str());
    return 0;
  }
  try {
    return Bench(o).run();
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_ref2va: %s\n", e.what());
    return 1;
  }
}

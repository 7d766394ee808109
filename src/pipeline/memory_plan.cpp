#include "pipeline/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "models/audio_vae/audio_vae_decoder.h"
#include "models/audio_vae/audio_vae_encoder.h"
#include "models/dit/dit.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/video_processor.h"
#include "models/qwen3vl/vision_model.h"
#include "util/error.h"

namespace h3 {

namespace {

// Slack on top of the counted tensors of a phase (what the formulas do not count exactly).
constexpr double kWorkingMargin = 1.10;
// Audio decode working memory per latent (spec/audio_vae.md §8 measures 103 MB beyond the weights for 207 latents
// of stereo in the reference; this keeps twice that).
constexpr uint64_t kAudioBytesPerLatent = uint64_t(1) << 20;

// The vision tower's working set over `patches` patch rows at once (pixel rows and the position embedding uploaded,
// the rotary tables (f32), the block scratch (x, normed, q|k|v, attention output, MLP hidden), a merger's two grouped
// buffers) plus its output features, and those features alone.
struct VisionWork {
  uint64_t features = 0, working = 0;
};
VisionWork vision_work(const MemoryPlanInputs& in, uint64_t patches) {
  const QwenVisionConfig& v = in.text.vision;
  const uint64_t s = dtype_size(in.activation_dtype);
  const uint64_t unit = v.spatial_merge_size * v.spatial_merge_size;
  const uint64_t tokens = patches / std::max<uint64_t>(unit, 1);
  const uint64_t C = v.hidden_size, I = v.intermediate_size, O = v.out_hidden_size, M = C * unit;
  const uint64_t K = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  const uint64_t head_dim = C / std::max<int64_t>(v.num_heads, 1);
  VisionWork w;
  w.features = (v.deepstack_visual_indexes.size() + 1) * tokens * O * s;
  w.working = patches * (K + C) * s + 2 * patches * head_dim * sizeof(float) + patches * (C + C + 3 * C + C + I) * s +
              2 * tokens * M * s + w.features;
  return w;
}

// What a request's keyframes add to the plan (all zero for t2va).
struct KeyframeWork {
  int64_t prompt_rows = 0;     // the vision blocks in the conditioner's input (start, pads, end per keyframe)
  int64_t condition_rows = 0;  // the keyframe blocks of the packed sequence (one latent frame each)
  uint64_t features = 0;       // the tower's output (final merger and DeepStack rows), alive through the prompt
  uint64_t vision = 0;         // the tower's working set over every keyframe's patches at once
  uint64_t encode = 0;         // one keyframe's VAE encode (they encode one after another)
};

KeyframeWork keyframe_work(const MemoryPlanInputs& in) {
  KeyframeWork w;
  if (in.keyframes <= 0) return w;
  const LatentGeometry& g = in.geometry;
  const ImageProcessorConfig& ip = in.image_processor;
  // Each keyframe is placed on the canvas, then resized by the processor to its grid (one temporal block).
  const auto [height, width] = smart_resize(g.height, g.width, ip.factor(), ip.min_pixels, ip.max_pixels);
  const uint64_t patches = in.keyframes * (height / ip.patch_size) * (width / ip.patch_size);
  // "<Picture k>: " adds a few text tokens per keyframe; the planned prompt tokens leave room for them.
  w.prompt_rows = static_cast<int64_t>(patches / (ip.merge_size * ip.merge_size)) + 2 * in.keyframes;
  w.condition_rows = in.keyframes * g.rows_per_frame();
  const VisionWork vision = vision_work(in, patches);
  w.features = vision.features;
  w.vision = vision.working;
  w.encode = VideoVaeEncoder::encode_workspace_bytes(in.vae, 1, g.height, g.width, in.encode_tiles);
  return w;
}

// What a request's references add to the plan (all zero without references).
struct ReferenceWork {
  int64_t prompt_rows = 0;     // vision blocks and labels in the conditioner's input
  int64_t condition_rows = 0;  // video and audio reference rows of the packed sequence
  uint64_t features = 0;       // the larger modality's tower output, alive through the prompt
  uint64_t vision = 0;         // the tower's working set over the larger modality
  uint64_t encode = 0;         // the largest single encode (video VAE or audio VAE)
};

ReferenceWork reference_work(const MemoryPlanInputs& in) {
  ReferenceWork w;
  const ImageProcessorConfig& ip = in.image_processor;
  const VideoProcessorConfig& vp = in.video_processor;
  const int64_t s = in.vae.spatial_ratio(), ph = in.dit.patch_size[1], pw = in.dit.patch_size[2];
  const int64_t hop = in.audio.hop_length();
  uint64_t image_patches = 0, video_patches = 0;
  for (const ReferenceFootprint& r : in.references) {
    w.prompt_rows += 8;  // "<Picture i>: ", "<Audio j>: " and the vision start/end tokens
    if (r.audio_samples > 0) {
      const int64_t latents = (r.audio_samples + hop - 1) / hop;
      w.condition_rows += kAudioStereoChannels * latents;
      w.encode = std::max(w.encode, AudioVaeEncoder::working_bytes(in.audio, kAudioStereoChannels, r.audio_samples));
    }
    if (r.kind == ReferenceFootprint::Kind::Audio) continue;
    const int64_t rows_per_frame = (r.height / s / ph) * (r.width / s / pw);
    if (r.kind == ReferenceFootprint::Kind::Image) {
      const auto [h, w2] = smart_resize(r.height, r.width, ip.factor(), ip.min_pixels, ip.max_pixels);
      const uint64_t patches = (h / ip.patch_size) * (w2 / ip.patch_size);
      image_patches += patches;
      w.prompt_rows += static_cast<int64_t>(patches / (ip.merge_size * ip.merge_size));
      w.condition_rows += rows_per_frame;
      w.encode = std::max(w.encode, VideoVaeEncoder::encode_workspace_bytes(in.vae, 1, r.height, r.width,
                                                                             in.encode_tiles));
      continue;
    }
    // A video: read at 2 fps (one frame in 12 at 24 fps) in groups of the temporal patch, encoded in whole clips.
    const int64_t sampled = std::max<int64_t>(vp.temporal_patch_size, (r.frames + 11) / 12);
    const int64_t padded = (sampled + vp.temporal_patch_size - 1) / vp.temporal_patch_size * vp.temporal_patch_size;
    const auto [h, w2] = video_smart_resize(padded, r.height, r.width, vp.temporal_patch_size, vp.factor(),
                                            vp.min_pixels, video_max_pixels(vp, padded));
    const uint64_t patches = static_cast<uint64_t>(padded / vp.temporal_patch_size) * (h / vp.patch_size) *
                             (w2 / vp.patch_size);
    video_patches += patches;
    w.prompt_rows += static_cast<int64_t>(patches / (vp.merge_size * vp.merge_size)) + 8 * padded;
    const int64_t latent_frames = VideoVaeEncoder::latent_frames(in.vae, r.encode_frames);
    w.condition_rows += latent_frames * rows_per_frame;
    w.encode = std::max(w.encode, VideoVaeEncoder::encode_workspace_bytes(in.vae, r.encode_frames, r.height,
                                                                           r.width, in.encode_tiles));
  }
  const VisionWork images = vision_work(in, image_patches), videos = vision_work(in, video_patches);
  w.features = images.features + videos.features;
  w.vision = std::max(images.working, videos.working) + std::min(images.features, videos.features);
  return w;
}

}  // namespace

std::string format_gb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

uint64_t dit_resident_bytes(const DitConfig& c, DType act, bool keep_adaln_weights, std::optional<int64_t> blocks) {
  const uint64_t D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim, Dh = c.attention_head_dim;
  const uint64_t P = c.patch_dim(), A = c.audio_in_channels, T = c.time_embed_dim, H = c.time_embed_hidden_dim;
  const uint64_t attn_ffn = 2 * D + 3 * I * D + 2 * Dh + D * I + 2 * F * D + F * D;
  const uint64_t adaln = static_cast<uint64_t>(kDitModalities * kAdaLnParams) * D;
  const uint64_t resident = blocks.value_or(c.num_layers);
  const uint64_t act_elems = D * c.text_dim + D + c.num_refiner_layers * attn_ffn + D + c.num_layers * adaln +
                             resident * (attn_ffn + (keep_adaln_weights ? adaln * T : 0)) + D + 2 * D * T + 2 * D;
  const uint64_t f32_elems = D * P + D + D * A + D + H * c.freq_dim + H + T * H + T + P * D + P + A * D + A;
  return act_elems * dtype_size(act) + f32_elems * sizeof(float);
}

uint64_t dit_step_workspace_bytes(const DitConfig& c, DType act, int64_t rows, int64_t timesteps) {
  const uint64_t L = rows, D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim, s = dtype_size(act);
  // The larger of the attention branch (x, h, q|k|v, attention output) and the FFN branch (x, h, fc1 output, SwiGLU
  // output, fc2 output); rotary tables; the AdaLN tables of every block.
  const uint64_t attention = L * (2 * D + 3 * I + I) * s, ffn = L * (3 * D + 3 * F) * s;
  const uint64_t rope = L * c.rotary_dim() * 2 * s;
  const uint64_t tables = static_cast<uint64_t>(c.num_layers) * kDitModalities * timesteps * kAdaLnParams * D * s;
  return std::max(attention, ffn) + rope + tables;
}

MemoryPlan plan_generation_memory(const MemoryPlanInputs& in) {
  MemoryPlan p;
  const DType act = in.activation_dtype;
  const bool references = !in.references.empty();
  using C = PlanComponent;
  p.weights.push_back({references ? "transformer (ref2va)" : "transformer",
                       dit_resident_bytes(in.dit, act, in.keep_adaln_weights, in.dit_layers), C::Transformer, {}});
  p.weights.push_back({"text encoder (layers 0-49)", QwenTextModel::resident_bytes(in.text, act), C::TextEncoder, {}});
  p.weights.push_back(
      {"video VAE decoder", VideoVaeDecoder::weight_bytes(in.vae, in.vae_gemm_dtype), C::VideoDecoder, {}});
  p.weights.push_back({"audio VAE decoder", AudioVaeDecoder::weight_bytes(in.audio), C::AudioDecoder, {}});
  const bool vision = in.keyframes > 0 || references;
  if (vision) {
    p.weights.push_back({"vision tower", QwenVisionModel::resident_bytes(in.text, act), C::VisionTower, {}});
    p.weights.push_back({"video VAE encoder", VideoVaeEncoder::weight_bytes(in.vae), C::VideoEncoder, {}});
  }
  if (references) p.weights.push_back({"audio VAE encoder", AudioVaeEncoder::weight_bytes(in.audio), C::AudioEncoder, {}});
  for (const auto& w : p.weights) p.weight_bytes += w.bytes;

  const LatentGeometry& g = in.geometry;
  const QwenTextConfig& t = in.text.text;
  const uint64_t s = dtype_size(act);
  const KeyframeWork kf = keyframe_work(in);
  const ReferenceWork rw = reference_work(in);
  const uint64_t n = in.prompt_tokens + kf.prompt_rows + rw.prompt_rows, chunk = std::min<uint64_t>(n, 4096);
  const uint64_t prompt = n * (3 * t.hidden_size + (t.num_attention_heads + 2 * t.num_key_value_heads) * t.head_dim +
                               t.num_attention_heads * t.head_dim) * s +
                          chunk * (3 * t.intermediate_size + t.hidden_size) * s + kf.features + rw.features;
  const int64_t rows = static_cast<int64_t>(n) + kf.condition_rows + rw.condition_rows + g.audio_rows() +
                       g.video_rows();
  // Distinct noise levels: at most one per grid point and modality, and the conditioning rows' fixed ones.
  const int64_t timesteps = 2 * (in.passes + 1) + (references ? 2 : in.keyframes > 0 ? 1 : 0);
  const uint64_t denoise = dit_step_workspace_bytes(in.dit, act, rows, timesteps);
  const uint64_t video = VideoVaeDecoder::decode_workspace_bytes(in.vae, in.vae_gemm_dtype, g.latent_frames,
                                                                 g.latent_height, g.latent_width, in.tiles);
  const uint64_t audio = kAudioBytesPerLatent * g.audio_latents;
  // The vision tower runs inside the prompt phase, before the conditioner reads its features.
  const std::vector<C> conditioner = vision ? std::vector<C>{C::TextEncoder, C::VisionTower}
                                            : std::vector<C>{C::TextEncoder};
  p.phases = {{"prompt", prompt, C::None, conditioner},
              {"denoise", denoise, C::None, {C::Transformer}},
              {"video decode", video, C::None, {C::VideoDecoder}},
              {"audio decode", audio, C::None, {C::AudioDecoder}}};
  if (in.keyframes > 0) {
    p.phases.push_back({"vision tower", kf.vision, C::None, conditioner});
    p.phases.push_back({"keyframe encode", kf.encode, C::None, {C::VideoEncoder}});
  }
  if (references) {
    p.phases.push_back({"vision tower", rw.vision, C::None, conditioner});
    p.phases.push_back({"reference encode", rw.encode, C::None, {C::VideoEncoder, C::AudioEncoder}});
  }
  for (auto& ph : p.phases) {
    ph.bytes = static_cast<uint64_t>(static_cast<double>(ph.bytes) * kWorkingMargin) + in.overhead_bytes;
    if (ph.bytes > p.working_bytes) {
      p.working_bytes = ph.bytes;
      p.peak_phase = ph.what;
    }
  }
  return p;
}

bool must_release_for(const MemoryPlan& plan, uint64_t held_bytes, uint64_t available) {
  return available > 0 && plan.peak_bytes() + held_bytes > available;
}

void check_memory_plan(const MemoryPlan& plan, uint64_t available, const std::string& device,
                       const std::string& canvas) {
  if (plan.peak_bytes() <= available) return;
  // When the weights alone do not fit, no canvas does.
  const bool weights_alone = plan.weight_bytes + kDeviceOverheadBytes > available;
  fail("a ", canvas, " generation with every model resident needs ~", format_gb(plan.peak_bytes()), " (weights ",
       format_gb(plan.weight_bytes), " + ", format_gb(plan.working_bytes), " working memory in the ", plan.peak_phase,
       " phase), but ", device, " has ", format_gb(available), " available to h3: ",
       weights_alone ? "the models alone do not fit; free the GPU from other processes or run with --device cpu"
                     : "use a smaller canvas or fewer frames, free the GPU from other processes, or run with "
                       "--device cpu");
}

}  // namespace h3

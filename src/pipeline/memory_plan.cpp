#include "pipeline/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "models/audio_vae/audio_vae_decoder.h"
#include "models/dit/dit.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/vision_model.h"
#include "util/error.h"

namespace h3 {

namespace {

// Allocator rounding, library workspaces (cuBLASLt, cuDNN) and fragmentation on top of the counted tensors.
constexpr double kWorkingMargin = 1.10;
constexpr uint64_t kFixedOverheadBytes = uint64_t(512) << 20;
// Audio decode working memory per latent (spec/audio_vae.md §8 measures 103 MB beyond the weights for 207 latents
// of stereo in the reference; this keeps twice that).
constexpr uint64_t kAudioBytesPerLatent = uint64_t(1) << 20;

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
  const QwenVisionConfig& v = in.text.vision;
  const ImageProcessorConfig& ip = in.image_processor;
  // Each keyframe is placed on the canvas, then resized by the processor to its grid (one temporal block).
  const auto [height, width] = smart_resize(g.height, g.width, ip.factor(), ip.min_pixels, ip.max_pixels);
  const uint64_t unit = ip.merge_size * ip.merge_size;
  const uint64_t patches = in.keyframes * (height / ip.patch_size) * (width / ip.patch_size);
  const uint64_t tokens = patches / unit;
  // "<Picture k>: " adds a few text tokens per keyframe; the planned prompt tokens leave room for them.
  w.prompt_rows = static_cast<int64_t>(tokens) + 2 * in.keyframes;
  w.condition_rows = in.keyframes * g.rows_per_frame();
  const uint64_t s = dtype_size(in.activation_dtype);
  const uint64_t C = v.hidden_size, I = v.intermediate_size, O = v.out_hidden_size, M = C * unit;
  const uint64_t K = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  const uint64_t head_dim = C / std::max<int64_t>(v.num_heads, 1);
  w.features = (v.deepstack_visual_indexes.size() + 1) * tokens * O * s;
  // Pixel rows and the position embedding uploaded, the rotary tables (f32), the block scratch (x, normed, q|k|v,
  // attention output, MLP hidden), a merger's two grouped buffers, and the features made so far.
  w.vision = patches * (K + C) * s + 2 * patches * head_dim * sizeof(float) + patches * (C + C + 3 * C + C + I) * s +
             2 * tokens * M * s + w.features;
  w.encode = VideoVaeEncoder::encode_workspace_bytes(in.vae, 1, g.height, g.width, in.encode_tiles);
  return w;
}

}  // namespace

std::string format_gb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

uint64_t dit_resident_bytes(const DitConfig& c, DType act, bool keep_adaln_weights) {
  const uint64_t D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim, Dh = c.attention_head_dim;
  const uint64_t P = c.patch_dim(), A = c.audio_in_channels, T = c.time_embed_dim, H = c.time_embed_hidden_dim;
  const uint64_t attn_ffn = 2 * D + 3 * I * D + 2 * Dh + D * I + 2 * F * D + F * D;
  const uint64_t adaln = static_cast<uint64_t>(kDitModalities * kAdaLnParams) * D;
  const uint64_t act_elems = D * c.text_dim + D + c.num_refiner_layers * attn_ffn + D +
                             c.num_layers * (attn_ffn + adaln + (keep_adaln_weights ? adaln * T : 0)) + D + 2 * D * T +
                             2 * D;
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
  p.weights.push_back({"transformer", dit_resident_bytes(in.dit, act, in.keep_adaln_weights)});
  p.weights.push_back({"text encoder (layers 0-49)", QwenTextModel::resident_bytes(in.text, act)});
  p.weights.push_back({"video VAE decoder", VideoVaeDecoder::weight_bytes(in.vae, in.vae_gemm_dtype)});
  p.weights.push_back({"audio VAE decoder", AudioVaeDecoder::weight_bytes(in.audio)});
  if (in.keyframes > 0) {
    p.weights.push_back({"vision tower", QwenVisionModel::resident_bytes(in.text, act)});
    p.weights.push_back({"video VAE encoder", VideoVaeEncoder::weight_bytes(in.vae)});
  }
  for (const auto& w : p.weights) p.weight_bytes += w.bytes;

  const LatentGeometry& g = in.geometry;
  const QwenTextConfig& t = in.text.text;
  const uint64_t s = dtype_size(act);
  const KeyframeWork kf = keyframe_work(in);
  const uint64_t n = in.prompt_tokens + kf.prompt_rows, chunk = std::min<uint64_t>(n, 4096);
  const uint64_t prompt = n * (3 * t.hidden_size + (t.num_attention_heads + 2 * t.num_key_value_heads) * t.head_dim +
                               t.num_attention_heads * t.head_dim) * s +
                          chunk * (3 * t.intermediate_size + t.hidden_size) * s + kf.features;
  const int64_t rows = in.prompt_tokens + kf.prompt_rows + kf.condition_rows + g.audio_rows() + g.video_rows();
  // Distinct noise levels: at most one per grid point and modality, and the keyframe rows' fixed one.
  const int64_t timesteps = 2 * (in.passes + 1) + (in.keyframes > 0 ? 1 : 0);
  const uint64_t denoise = dit_step_workspace_bytes(in.dit, act, rows, timesteps);
  const uint64_t video = VideoVaeDecoder::decode_workspace_bytes(in.vae, in.vae_gemm_dtype, g.latent_frames,
                                                                 g.latent_height, g.latent_width, in.tiles);
  const uint64_t audio = kAudioBytesPerLatent * g.audio_latents;
  p.phases = {{"prompt", prompt}, {"denoise", denoise}, {"video decode", video}, {"audio decode", audio}};
  if (in.keyframes > 0) {
    p.phases.push_back({"vision tower", kf.vision});
    p.phases.push_back({"keyframe encode", kf.encode});
  }
  for (auto& ph : p.phases) {
    ph.bytes = static_cast<uint64_t>(static_cast<double>(ph.bytes) * kWorkingMargin) + kFixedOverheadBytes;
    if (ph.bytes > p.working_bytes) {
      p.working_bytes = ph.bytes;
      p.peak_phase = ph.what;
    }
  }
  return p;
}

void check_memory_plan(const MemoryPlan& plan, uint64_t available, const std::string& device,
                       const std::string& canvas) {
  if (plan.peak_bytes() <= available) return;
  // When the weights alone do not fit, no canvas does.
  const bool weights_alone = plan.weight_bytes + kFixedOverheadBytes > available;
  fail("a ", canvas, " generation with every model resident needs ~", format_gb(plan.peak_bytes()), " (weights ",
       format_gb(plan.weight_bytes), " + ", format_gb(plan.working_bytes), " working memory in the ", plan.peak_phase,
       " phase), but ", device, " has ", format_gb(available), " available to h3: ",
       weights_alone ? "the models alone do not fit; free the GPU from other processes or run with --device cpu"
                     : "use a smaller canvas or fewer frames, free the GPU from other processes, or run with "
                       "--device cpu");
}

}  // namespace h3

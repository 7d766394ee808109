// h3::Engine: one resident process for many generations (tokenizer → conditioner → sampler → both decoders).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <list>
#include <mutex>

#include "backend/backend.h"
#include "backend/device.h"
#include "backend/memory_budget.h"
#include "h3/h3.h"
#include "media/frame_scale.h"
#include "media/image_input.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "models/audio_vae/audio_vae_encoder.h"
#include "models/dit/dit.h"
#include "models/dit/dit_fasth3.h"
#include "models/dit/dit_token_reduction.h"
#include "parallel/nccl_communicator.h"
#include "parallel/rank_group.h"
#include "parallel/sequence_parallel.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/video_processor.h"
#include "models/qwen3vl/vision_model.h"
#include "models/video_vae/decoder.h"
#include "models/video_vae/encoder.h"
#include "pipeline/dit_velocity.h"
#include "pipeline/engine_parts.h"
#include "pipeline/precision.h"
#include "pipeline/geometry.h"
#include "pipeline/keyframes.h"
#include "pipeline/memory_plan.h"
#include "pipeline/references.h"
#include "pipeline/residency_plan.h"
#include "pipeline/reuse.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "util/cancel.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace h3 {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Load: return "load";
    case Phase::ReadReferences: return "reference media";
    case Phase::EncodePrompt: return "prompt";
    case Phase::EncodeKeyframes: return "keyframes";
    case Phase::EncodeReferences: return "references";
    case Phase::Denoise: return "denoise";
    case Phase::DecodeVideo: return "video decode";
    case Phase::DecodeAudio: return "audio decode";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The parts of an engine a workflow computes with (spec/layout.md §4), in loading order. ref2va has a transformer of
// its own (the snapshot's transformer_ref/, or the original Ref2VA/ partition).
enum class EnginePart {
  Tokenizer,
  TextEncoder,
  VisionTower,
  Transformer,
  ReferenceTransformer,
  VideoEncoder,
  AudioEncoder,
  VideoDecoder,
  AudioDecoder
};

// Empty for a workflow this engine does not serve yet.
std::vector<EnginePart> served_parts(Workflow w) {
  switch (w) {
    case Workflow::T2VA:
      return {EnginePart::Tokenizer, EnginePart::TextEncoder, EnginePart::Transformer, EnginePart::VideoDecoder,
              EnginePart::AudioDecoder};
    case Workflow::FL2VA:
      return {EnginePart::Tokenizer,    EnginePart::TextEncoder,  EnginePart::VisionTower, EnginePart::Transformer,
              EnginePart::VideoEncoder, EnginePart::VideoDecoder, EnginePart::AudioDecoder};
    case Workflow::Ref2VA:
      return {EnginePart::Tokenizer,    EnginePart::TextEncoder,  EnginePart::VisionTower,
              EnginePart::ReferenceTransformer, EnginePart::VideoEncoder, EnginePart::AudioEncoder,
              EnginePart::VideoDecoder, EnginePart::AudioDecoder};
  }
  return {};
}

std::vector<EnginePart> parts_for(Workflow w) {
  std::vector<EnginePart> parts = served_parts(w);
  H3_CHECK(!parts.empty(), "the ", workflow_name(w), " workflow is not served yet");
  return parts;
}

// The component of the memory plan a part is (the tokenizer is no device memory: None, always kept).
PlanComponent plan_component(EnginePart p) {
  switch (p) {
    case EnginePart::Tokenizer: return PlanComponent::None;
    case EnginePart::TextEncoder: return PlanComponent::TextEncoder;
    case EnginePart::VisionTower: return PlanComponent::VisionTower;
    case EnginePart::Transformer:
    case EnginePart::ReferenceTransformer: return PlanComponent::Transformer;
    case EnginePart::VideoEncoder: return PlanComponent::VideoEncoder;
    case EnginePart::AudioEncoder: return PlanComponent::AudioEncoder;
    case EnginePart::VideoDecoder: return PlanComponent::VideoDecoder;
    case EnginePart::AudioDecoder: return PlanComponent::AudioDecoder;
  }
  return PlanComponent::None;
}


bool same_ring(const std::optional<BlockStreaming>& a, const std::optional<BlockStreaming>& b) {
  if (!a || !b) return !a && !b;
  return a->source == b->source && a->slots == b->slots && a->reader_threads == b->reader_threads &&
         a->direct_io == b->direct_io;
}

// What a request is conditioned on, as a cache key: the prompt, every keyframe as placed on the canvas (its anchor,
// size and a digest of its pixels) and every reference as normalized (its kind, sizes and a digest of its media).
struct ConditioningKey {
  std::string prompt;
  std::vector<std::string> keyframes;   // "first 864x480 <digest>", packed order
  std::vector<std::string> references;  // "video 40x24x124 <digest> audio 2x165333 <digest>", request order
  bool operator==(const ConditioningKey&) const = default;
};

// FNV-1a over bytes: a cache key, not a security boundary (a collision costs a wrong cache hit between two inputs
// of one size — astronomically unlikely over 64 bits for the media a session holds).
uint64_t fnv1a(const void* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
std::string pixel_digest(const Rgb8Image& image) {
  return cat(image.width, "x", image.height, " ", fnv1a(image.rgb.data(), image.rgb.size()));
}

std::string reference_digest(const NormalizedReference& r) {
  std::string out;
  switch (r.kind) {
    case ReferenceInput::Kind::Image: out = cat("image ", pixel_digest(r.image)); break;
    case ReferenceInput::Kind::Video:
      out = cat("video ", r.frames.width, "x", r.frames.height, "x", r.frames.frames, " ",
                fnv1a(r.frames.rgb.data(), r.frames.rgb.size()));
      break;
    case ReferenceInput::Kind::Audio: out = "audio"; break;
  }
  if (r.audio)
    out += cat(" sound ", r.audio->channels, "x", r.audio->frames(), " ",
               fnv1a(r.audio->samples.data(), r.audio->samples.size() * sizeof(float)));
  return out;
}

// What one request is conditioned on, computed once per distinct key and cached: the presentation, its conditioner
// rows, the clean normalized latents of its visual conditions (none for t2va) and, for ref2va, the reference blocks
// of its layout and the clean rows of its reference audio.
struct Conditioning {
  ConditioningKey key;
  Presentation presentation;
  Tensor embeds;                       // [Nt, hidden] host F32
  std::vector<Tensor> visual_latents;  // (1, C, Fc, hc, wc) per visual condition, packed order
  std::vector<ReferenceBlock> reference_blocks;
  std::vector<Tensor> reference_audio;  // [2·A_j, Ca] host F32 per reference with sound, request order
};


// Every phase's result is checked for NaN and infinity (issue 22): a broken checkpoint or input fails here, with
// the component and the phase named, instead of reaching FFmpeg's encoder (or an MP4 of garbage). The outputs are
// written after generate() returns, so nothing is written.
void check_finite(const Tensor& t, const char* component, Phase phase) {
  H3_CHECK(t.device() == Device::CPU && t.dtype() == DType::F32, "check_finite: host F32 expected, got ", t.str());
  const float* p = t.ptr<float>();
  std::atomic<int64_t> bad{0};
  parallel_for(0, t.numel(), 1 << 16, [&](int64_t i0, int64_t i1) {
    int64_t n = 0;
    for (int64_t i = i0; i < i1; ++i) n += !std::isfinite(p[i]);
    bad += n;
  });
  if (bad > 0)
    fail("The ", component, " gave ", bad.load(), " non-finite values (of ", t.numel(), ") in the ", phase_name(phase),
         " phase: its weights or its inputs hold NaN or infinity; nothing was written.");
}


// The keyframe blocks of a request, in packed order (MiniMaxH3ResizeStep's keyframe_anchors): the first, then the last.
std::vector<KeyframeAnchor> keyframe_anchors(const GenerationRequest& r) {
  std::vector<KeyframeAnchor> out;
  if (r.first_frame) out.push_back(KeyframeAnchor::First);
  if (r.last_frame) out.push_back(KeyframeAnchor::Last);
  return out;
}

// A keyframe's pixels: decoded from its file, or the caller's buffer.
Rgb8Image keyframe_pixels(const ImageInput& in) {
  if (in.is_file()) return read_image_file(in.path);
  return *in.pixels;
}

// A keyframe's size without decoding it (its file's header, or the buffer's own), checking what can be checked.
std::pair<int64_t, int64_t> keyframe_size(const ImageInput& in) {
  if (in.is_file()) {
    const ImageInfo info = probe_image_file(in.path);
    return {info.width, info.height};
  }
  const Rgb8Image& p = *in.pixels;
  H3_CHECK(p.width > 0 && p.height > 0 && p.rgb.size() == static_cast<size_t>(p.width) * p.height * 3,
           in.describe(), ": an RGB8 keyframe needs width·height·3 bytes and a positive size, got ", p.rgb.size(),
           " bytes");
  return {p.width, p.height};
}

}  // namespace

struct Engine::Impl {
  EngineOptions options;
  bool from_parts = false;  // components built in memory: nothing to load
  Snapshot snapshot;
  DitConfig dit_config;
  VideoVaeConfig vae_config;
  AudioVaeConfig audio_config;
  TextEncoderConfig text_config;
  SchedulerConfig video_shift, audio_shift;
  bool transformer_has_gates = false;  // a FastH3 student (models/dit/dit_fasth3.h)
  CanvasConfig canvas;  // the snapshot index's canvas rule (fl2va canvases, ref2va video and image canvases)
  std::optional<ImageProcessorConfig> image_processor;  // processor/, when the snapshot has it
  // processor/'s video settings, read the first time a request has a video reference.
  mutable std::optional<VideoProcessorConfig> video_processor;

  std::unique_ptr<Backend> backend;
  DitPrecision dit_precision;  // options.precision as resolve_dit_precision resolved it for `backend`
  // Read by the first validation of a whole request (the prompt's rules are the tokenizer's: prompt_tokenizer), or
  // with the components of a workflow.
  mutable std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<QwenTextModel> text;
  std::unique_ptr<Dit> dit;
  std::unique_ptr<VideoVaeDecoder> vae;
  std::unique_ptr<AudioVaeDecoder> audio;
  std::unique_ptr<QwenVisionModel> vision;
  std::unique_ptr<VideoVaeEncoder> vae_encoder;
  std::unique_ptr<Dit> dit_ref;  // ref2va's transformer
  std::unique_ptr<AudioVaeEncoder> audio_encoder;

  EngineParts::Makers makers;  // from_parts: what makes a component absent or released
  // The residency plan of the latest request (resident before any), and the block streaming the resident
  // transformers were made with.
  ResidencyPlan plan;
  std::optional<BlockStreaming> transformer_streaming;

  std::list<Conditioning> prompt_cache;  // most recent first
  mutable EngineStats stats;  // const validate() counts the tokenizer it reads

  // The request's attention (models/dit/dit_fasth3.h): its choices against the transformer's gates; --steps stays
  // the passes. Throws one sentence for choices the checkpoint cannot take.
  FastH3Plan attention_plan(const GenerationRequest& r) const {
    FastH3Choices c;
    c.attention = r.attention;
    c.sparsity = r.sparsity;
    c.passes = r.steps;
    return resolve_fasth3_plan(transformer_has_gates, c, kDefaultSteps);
  }
  // The passes without --steps: a FastH3 student's grid, else kDefaultSteps.
  int64_t default_steps() const { return checkpoint_default_passes(transformer_has_gates, kDefaultSteps); }

  int64_t canvas_multiple() const { return vae_config.spatial_ratio() * dit_config.patch_size[1]; }

  bool is_loaded(EnginePart p) const {
    switch (p) {
      case EnginePart::Tokenizer: return tokenizer != nullptr;
      case EnginePart::TextEncoder: return text != nullptr;
      case EnginePart::VisionTower: return vision != nullptr;
      case EnginePart::Transformer: return dit != nullptr;
      case EnginePart::ReferenceTransformer: return dit_ref != nullptr;
      case EnginePart::VideoEncoder: return vae_encoder != nullptr;
      case EnginePart::AudioEncoder: return audio_encoder != nullptr;
      case EnginePart::VideoDecoder: return vae != nullptr;
      case EnginePart::AudioDecoder: return audio != nullptr;
    }
    return false;
  }

  // `defer_blocks`: a transformer loads without its blocks' attention and FFN weights (a request with --layers loads
  // the blocks it runs once it has ranked them, Dit::select_blocks).
  void load_part(EnginePart p, bool defer_blocks) {
    if (from_parts) return make_part(p);
    switch (p) {
      case EnginePart::Tokenizer:
        tokenizer = read_tokenizer();
        return;
      case EnginePart::TextEncoder:
        text = QwenTextModel::load(*backend, snapshot.text_encoder, plan.conditioner_streaming);
        return;
      case EnginePart::VisionTower: vision = QwenVisionModel::load(*backend, snapshot.text_encoder); return;
      case EnginePart::VideoEncoder: vae_encoder = VideoVaeEncoder::load(*backend, snapshot.vae); return;
      case EnginePart::AudioEncoder: audio_encoder = AudioVaeEncoder::load(*backend, snapshot.audio_vae); return;
      case EnginePart::Transformer:
      case EnginePart::ReferenceTransformer: {
        const bool ref = p == EnginePart::ReferenceTransformer;
        DitOptions o;
        o.keep_adaln_weights = options.keep_adaln_weights;
        o.precision = dit_precision;
        if (defer_blocks) o.blocks = std::vector<int64_t>{};
        o.streaming = plan.transformer_streaming;
        (ref ? dit_ref : dit) = Dit::load(*backend, ref ? snapshot.transformer_ref : snapshot.transformer, o);
        transformer_streaming = plan.transformer_streaming;
        return;
      }
      case EnginePart::VideoDecoder: vae = VideoVaeDecoder::load(*backend, snapshot.vae); return;
      case EnginePart::AudioDecoder: audio = AudioVaeDecoder::load(*backend, snapshot.audio_vae); return;
    }
  }

  // A from_parts component made by its maker.
  void make_part(EnginePart p) {
    switch (p) {
      case EnginePart::TextEncoder: text = makers.text(plan.conditioner_streaming); return;
      case EnginePart::Transformer:
        dit = makers.dit(plan.transformer_streaming);
        transformer_streaming = plan.transformer_streaming;
        return;
      case EnginePart::VideoDecoder: vae = makers.vae(); return;
      case EnginePart::AudioDecoder: audio = makers.audio(); return;
      default: fail("this engine was built without the ", workflow_name(Workflow::FL2VA), "/",
                    workflow_name(Workflow::Ref2VA), " part it needs");
    }
  }
  bool has_maker(EnginePart p) const {
    switch (p) {
      case EnginePart::TextEncoder: return bool(makers.text);
      case EnginePart::Transformer: return bool(makers.dit);
      case EnginePart::VideoDecoder: return bool(makers.vae);
      case EnginePart::AudioDecoder: return bool(makers.audio);
      default: return false;
    }
  }
  // Whether a part can be released and made resident again (from the snapshot, or by its maker).
  bool reloadable(EnginePart p) const { return !from_parts || has_maker(p); }
  // Whether a plan may release the parts of workflow `w` between phases.
  bool can_release(Workflow w) const {
    for (EnginePart p : parts_for(w))
      if (p != EnginePart::Tokenizer && !reloadable(p)) return false;
    return true;
  }

  void release(EnginePart p) {
    switch (p) {
      case EnginePart::Tokenizer: return;  // host memory only
      case EnginePart::TextEncoder: text.reset(); return;
      case EnginePart::VisionTower: vision.reset(); return;
      case EnginePart::Transformer: dit.reset(); return;
      case EnginePart::ReferenceTransformer: dit_ref.reset(); return;
      case EnginePart::VideoEncoder: vae_encoder.reset(); return;
      case EnginePart::AudioEncoder: audio_encoder.reset(); return;
      case EnginePart::VideoDecoder: vae.reset(); return;
      case EnginePart::AudioDecoder: audio.reset(); return;
    }
  }

  // The parts one phase computes with, made resident for it (HeldParts' constructor) and released after it when
  // the plan does not keep them resident (its destructor: on success, cancel and error alike).
  class HeldParts {
   public:
    // `defer_blocks`: as load_part's, for a transformer.
    HeldParts(Impl& m, std::vector<EnginePart> parts, bool defer_blocks = false) : m_(m), parts_(std::move(parts)) {
      for (EnginePart p : parts_) m_.ensure_part(p, defer_blocks);
    }
    ~HeldParts() {
      for (EnginePart p : parts_)
        if (!m_.plan.keeps_resident(plan_component(p)) && m_.reloadable(p)) m_.release(p);
    }
    HeldParts(const HeldParts&) = delete;
    HeldParts& operator=(const HeldParts&) = delete;

   private:
    Impl& m_;
    std::vector<EnginePart> parts_;
  };

  std::unique_ptr<Tokenizer> read_tokenizer() const {
    return std::make_unique<Tokenizer>(Tokenizer::from_file(snapshot.tokenizer.dir));
  }

  const Tokenizer& prompt_tokenizer() const {
    if (!tokenizer) {
      tokenizer = read_tokenizer();
      ++stats.component_loads;
    }
    return *tokenizer;
  }

  // The prompt's rules (text/prompt.h's check_prompt) and its length: at most the text encoder's
  // max_position_embeddings tokens, since the reference neither truncates nor refuses (conditioner.md §4).
  void check_request_prompt(const std::string& prompt) const {
    const Tokenizer& t = prompt_tokenizer();
    check_prompt(t, prompt);
    const int64_t limit = text_config.text.max_position_embeddings;
    // A token stands for at least one byte of the NFC text, at most 3 times as long as the prompt (UAX #15's
    // expansion factor for UTF-8): a prompt of up to limit / 3 bytes is not counted.
    if (static_cast<int64_t>(prompt.size()) <= limit / 3) return;
    const size_t tokens = t.encode(prompt).size();
    H3_CHECK(static_cast<int64_t>(tokens) <= limit, "The prompt is ", tokens, " tokens long; the text encoder takes at "
             "most ", limit, " (max_position_embeddings in text_encoder/config.json), and h3, like the reference, does "
             "not cut a prompt short: shorten it.");
  }

  Dit& transformer_for(Workflow w) const { return w == Workflow::Ref2VA ? *dit_ref : *dit; }

  // The parts of workflow `w` the plan keeps resident (loaded before the request; the others load for their phase).
  std::vector<EnginePart> resident_parts(Workflow w) const {
    std::vector<EnginePart> out;
    for (EnginePart p : parts_for(w))
      if (plan.keeps_resident(plan_component(p)) || !reloadable(p)) out.push_back(p);
    return out;
  }

  bool needs_loading(Workflow w) const {
    for (EnginePart p : resident_parts(w))
      if (!is_loaded(p) && reloadable(p)) return true;
    return false;
  }

  // Loads `p` when it is missing (from the snapshot, or by its maker); returns true when it was loaded.
  bool ensure_part(EnginePart p, bool defer_blocks = false) {
    if (is_loaded(p) || !reloadable(p)) return false;
    if (!backend) backend = make_backend(options.device);
    load_part(p, defer_blocks);
    if (!from_parts) ++stats.component_loads;
    return true;
  }

  // Loads what workflow `w` keeps resident under the plan and is missing; returns true when anything was loaded.
  // `defer_blocks`: as load_part's, for the transformer.
  bool ensure_loaded(Workflow w, bool defer_blocks = false) {
    bool loaded = false;
    for (EnginePart p : resident_parts(w)) {
      throw_if_cancelled();  // a component loaded before the cancel stays loaded
      loaded = ensure_part(p, defer_blocks) || loaded;
    }
    return loaded;
  }

  // Releases what the plan does not keep between phases, and the transformers made with another ring than the
  // plan's (they load again with the plan's).
  void apply_plan() {
    for (EnginePart p : {EnginePart::TextEncoder, EnginePart::VisionTower, EnginePart::VideoEncoder,
                         EnginePart::AudioEncoder, EnginePart::VideoDecoder, EnginePart::AudioDecoder,
                         EnginePart::Transformer, EnginePart::ReferenceTransformer})
      if (!plan.keeps_resident(plan_component(p)) && reloadable(p)) release(p);
    if (!same_ring(transformer_streaming, plan.transformer_streaming)) {
      for (EnginePart p : {EnginePart::Transformer, EnginePart::ReferenceTransformer})
        if (reloadable(p)) release(p);
    } else if (transformer_streaming && plan.transformer_streaming) {
      plan.transformer_streaming->counters = transformer_streaming->counters;  // the loaded ring reports here
    }
  }

  EncodeTileOptions encode_tile_options() const { return {options.vae_tile, options.vae_tile_overlap}; }

  // The keyframes put on the canvas the model runs on (MiniMaxH3ResizeStep; the render canvas, as h3.c reads them
  // there), packed order.
  KeyframePlacement place(const ResolvedRequest& r) const {
    const GenerationRequest& q = r.request;
    std::optional<Rgb8Image> first, last;
    if (q.first_frame) first = keyframe_pixels(*q.first_frame);
    if (q.last_frame) last = keyframe_pixels(*q.last_frame);
    return place_keyframes(first ? &*first : nullptr, last ? &*last : nullptr, r.render_width, r.render_height,
                           canvas_multiple(), canvas);
  }

  // The rules a request's references are normalized by (the snapshot's canvas rule, the audio VAE's rate, the
  // conditioner's temporal patch).
  ReferenceRules reference_rules() const {
    ReferenceRules rules;
    rules.canvas_multiple = canvas_multiple();
    rules.canvas = canvas;
    rules.audio_rate = static_cast<int>(audio_config.sampling_rate);
    rules.temporal_patch = text_config.vision.temporal_patch_size;
    return rules;
  }

  // The conditioning of a request, from the cache when the same key was conditioned before. `encodes` (parity
  // testing): the posterior draws of the visual conditions, which bypass the cache.
  const Conditioning& condition(const ResolvedRequest& r, const std::vector<Tensor>& encodes, bool& hit,
                                const std::function<void(Phase, std::function<void()>)>& timed_phase) {
    Conditioning c;
    c.key.prompt = r.request.prompt;
    std::optional<KeyframePlacement> placed;
    std::vector<NormalizedReference> refs;
    if (r.workflow == Workflow::FL2VA) {
      placed = place(r);
      H3_CHECK(placed->canvas.width == r.render_width && placed->canvas.height == r.render_height,
               "the keyframes were placed on ", placed->canvas.width, "x", placed->canvas.height, ", not on the ",
               r.render_width, "x", r.render_height, " canvas the request resolved");
      for (const PlacedKeyframe& k : placed->keyframes)
        c.key.keyframes.push_back(cat(keyframe_anchor_name(k.anchor), " ", pixel_digest(k.image)));
    } else if (r.workflow == Workflow::Ref2VA) {
      timed_phase(Phase::ReadReferences,
                  [&] {
                    refs = normalize_references(r.request, r.frames, r.render_width, r.render_height,
                                                reference_rules());
                  });
      for (const NormalizedReference& n : refs) c.key.references.push_back(reference_digest(n));
    }
    if (encodes.empty()) {
      for (auto it = prompt_cache.begin(); it != prompt_cache.end(); ++it) {
        if (!(it->key == c.key)) continue;
        prompt_cache.splice(prompt_cache.begin(), prompt_cache, it);
        hit = true;
        ++stats.prompt_cache_hits;
        timed_phase(Phase::EncodePrompt, [] {});
        return prompt_cache.front();
      }
    }
    hit = false;
    if (r.workflow == Workflow::T2VA) {
      const HeldParts held(*this, {EnginePart::TextEncoder});
      timed_phase(Phase::EncodePrompt, [&] {
        c.presentation = present_t2va(*tokenizer, c.key.prompt);
        c.embeds = text->encode(c.presentation.ids);
      });
    } else if (r.workflow == Workflow::FL2VA) {
      std::vector<Rgb8Image> images;
      for (PlacedKeyframe& k : placed->keyframes) images.push_back(std::move(k.image));
      std::optional<HeldParts> held;
      held.emplace(*this, std::vector<EnginePart>{EnginePart::VisionTower, EnginePart::TextEncoder});
      timed_phase(Phase::EncodePrompt, [&] {
        H3_CHECK(image_processor, "the snapshot has no processor/ component, which fl2va needs");
        const QwenVisionInputs inputs = prepare_images(*image_processor, images);
        const VisionFeatures features = vision->encode(inputs);
        c.presentation = present_fl2va(*tokenizer, c.key.prompt, inputs.grids, image_processor->merge_size);
        c.embeds = text->encode(c.presentation.ids, &features);
      });
      held.reset();
      const HeldParts encoder(*this, {EnginePart::VideoEncoder});
      timed_phase(Phase::EncodeKeyframes, [&] {
        for (size_t i = 0; i < images.size(); ++i)
          c.visual_latents.push_back(vae_encoder->encode_visual_condition(
              images[i], encodes.empty() ? nullptr : &encodes[i], encode_tile_options()));
      });
    } else {
      {
        const HeldParts held(*this, {EnginePart::VisionTower, EnginePart::TextEncoder});
        timed_phase(Phase::EncodePrompt, [&] { encode_reference_prompt(refs, c); });
      }
      const HeldParts encoders(*this, {EnginePart::VideoEncoder, EnginePart::AudioEncoder});
      timed_phase(Phase::EncodeReferences, [&] { encode_references(refs, encodes, c); });
    }
    ++stats.prompt_encodes;
    if (!encodes.empty()) {
      injected_conditioning = std::move(c);
      return injected_conditioning;
    }
    prompt_cache.push_front(std::move(c));
    while (prompt_cache.size() > std::max<size_t>(options.prompt_cache_entries, 1)) prompt_cache.pop_back();
    return prompt_cache.front();
  }

  // ref2va's conditioner input (encoders.py MiniMaxH3Ref2VATextEncoderStep): the image references through the
  // image processor and the video references' 2 fps readings through the video processor, each modality in one
  // tower call; the presentation labels the references in request order.
  void encode_reference_prompt(const std::vector<NormalizedReference>& refs, Conditioning& c) {
    H3_CHECK(image_processor, "the snapshot has no processor/ component, which ref2va needs");
    const ReferenceVisionInputs in = reference_vision_inputs(
        refs, *image_processor, video_processor ? &*video_processor : nullptr, text_config.vision.temporal_patch_size);
    std::optional<VisionFeatures> images, videos;
    if (in.images) images = vision->encode(*in.images);
    if (in.videos) videos = vision->encode(*in.videos);
    c.presentation = present_ref2va(*tokenizer, c.key.prompt, in.presented, image_processor->merge_size);
    c.embeds = text->encode(c.presentation.ids, images ? &*images : nullptr, videos ? &*videos : nullptr);
  }

  // ref2va's encodes (encoders.py MiniMaxH3Ref2VAReferenceEncoderStep), request order: every image and video
  // reference through the video VAE (a video's frames snapped down to whole clips), every soundtrack and audio
  // reference through the audio VAE encoder (clean rows); and the layout's reference blocks sized by them.
  void encode_references(const std::vector<NormalizedReference>& refs, const std::vector<Tensor>& encodes,
                         Conditioning& c) {
    for (const NormalizedReference& n : refs) {
      ReferenceBlock block;
      if (n.kind != ReferenceInput::Kind::Audio) {
        const size_t i = c.visual_latents.size();
        const Tensor* eps = encodes.empty() ? nullptr : &encodes[i];
        Tensor z = n.kind == ReferenceInput::Kind::Image
                       ? vae_encoder->encode_visual_condition(n.image, eps, encode_tile_options())
                       : vae_encoder->encode_visual_condition(
                             reference_video_encode_clip(n.frames, vae_encoder->config()), eps, encode_tile_options());
        block.kind = n.kind == ReferenceInput::Kind::Image ? ReferenceBlock::Kind::Image : ReferenceBlock::Kind::Video;
        block.latent_frames = z.dim(2);
        block.latent_height = z.dim(3);
        block.latent_width = z.dim(4);
        c.visual_latents.push_back(std::move(z));
      } else {
        block.kind = ReferenceBlock::Kind::Audio;
      }
      if (n.audio) {
        Tensor rows = audio_encoder->encode_reference(waveform_tensor(*n.audio));
        block.audio_latents = rows.dim(0) / 2;
        c.reference_audio.push_back(std::move(rows));
      }
      c.reference_blocks.push_back(block);
    }
  }
  Conditioning injected_conditioning;  // the last conditioning made with injected draws (never cached)

  TileOptions tile_options() const {
    TileOptions t;
    t.tile = options.vae_tile;
    t.tile_overlap = options.vae_tile_overlap;
    t.max_batch_tokens = default_video_vae_batch_tokens(*backend);
    return t;
  }

  MemoryPlan plan_memory(const ResolvedRequest& r) const { return plan_generation_memory(memory_inputs(r)); }

  MemoryPlanInputs memory_inputs(const ResolvedRequest& r) const {
    MemoryPlanInputs in;
    in.dit = dit_config;
    in.text = text_config;
    in.vae = vae_config;
    in.audio = audio_config;
    in.activation_dtype = backend->activation_dtype();
    in.vae_gemm_dtype = video_vae_gemm_dtype(*backend);
    in.keep_adaln_weights = options.keep_adaln_weights;
    in.dit_layers = r.request.layers;
    in.tiles = tile_options();
    in.geometry = LatentGeometry::make(r.render_width, r.render_height, r.frames, dit_config.patch_size,
                                       dit_config.in_channels, dit_config.audio_in_channels, vae_config.spatial_ratio());
    in.passes = r.evaluated_passes;
    // The CPU backend under a budget counts exactly its device tensors: no library workspaces to allow for.
    in.overhead_bytes = backend->device() == Device::CPU && device_memory_limit(*backend) ? 0 : kDeviceOverheadBytes;
    if (r.workflow == Workflow::FL2VA) {
      in.keyframes = static_cast<int64_t>(r.request.first_frame.has_value()) +
                     static_cast<int64_t>(r.request.last_frame.has_value());
      in.image_processor = image_processor.value_or(ImageProcessorConfig{});
      in.encode_tiles = encode_tile_options();
    }
    if (r.workflow == Workflow::Ref2VA) {
      in.references =
          reference_footprints(r.request, r.frames, r.render_width, r.render_height, reference_rules(), vae_config);
      in.image_processor = image_processor.value_or(ImageProcessorConfig{});
      in.video_processor = video_processor.value_or(VideoProcessorConfig{});
      in.encode_tiles = encode_tile_options();
    }
    return in;
  }

  // What h3 can use on the device: its free memory (under a budget, what the budget leaves), the allocator's cached
  // blocks, and what h3 holds now (the plans count the resident weights again).
  uint64_t available_device_memory() const {
    const MemoryStats m = backend->memory_stats();
    return m.device_free + m.cached + m.in_use;
  }

  // The host memory the loaded models' rings hold now (pinned copies, staging), and the pinned blocks the backend
  // keeps from released ones (a conditioner streamed for its phase returns its copies there): the next plan may
  // reuse it, and MemAvailable counts it used.
  uint64_t held_streaming_host_bytes() const {
    uint64_t n = (text ? text->streaming_host_bytes() : 0) + backend->memory_stats().host_pinned_cached;
    for (const std::unique_ptr<Dit>* d : {&dit, &dit_ref})
      if (*d) n += (*d)->streaming_host_bytes();
    return n;
  }

  // The residency plan of request `r` on the memory available now (throws the plan's refusal): resident only on a
  // backend that does not report its memory (nothing to check, today's path) and for an engine whose parts cannot be
  // made again (from_parts without makers), which is refused when it does not fit.
  ResidencyPlan choose_plan(const ResolvedRequest& r) const {
    if (backend->memory_stats().device_total == 0) return {};
    const MemoryPlanInputs in = memory_inputs(r);
    const std::string canvas = cat(r.render_width, "x", r.render_height, "x", r.frames);
    if (!can_release(r.workflow)) {
      const MemoryPlan mp = plan_generation_memory(in);
      check_memory_plan(mp, available_device_memory(), describe(detect_compute_device()), canvas);
      ResidencyPlan resident;
      resident.budget_bytes = available_device_memory();
      resident.peak_bytes = mp.peak_bytes();
      resident.peak_phase = mp.peak_phase;
      return resident;
    }
    ResidencyBudget b;
    b.device_bytes = available_device_memory();
    b.host_bytes = host_memory_budget(held_streaming_host_bytes());
    b.disk_streaming = options.ssd_streaming;
    b.conditioner_can_stream = true;
    b.disk_source = !from_parts;
    return choose_residency_plan(in, b, canvas);
  }

  // Before anything loads (backends that report their device memory only): a session that switches between ref2va
  // and the other workflows holds both transformers only while they fit — the one this request does not use is
  // released when it and the resident plan would not fit together (it is loaded again when a request needs it) —,
  // then the request's residency plan is chosen (a request no plan fits is refused) and applied: what it does not
  // keep resident is released.
  void fit_memory(const ResolvedRequest& r) {
    if (backend->memory_stats().device_total > 0) {
      const bool ref = r.workflow == Workflow::Ref2VA;
      std::unique_ptr<Dit>& other = ref ? dit : dit_ref;
      if (!from_parts && other && !(ref ? dit_ref : dit) &&
          must_release_for(plan_memory(r), other->resident_weight_bytes(), available_device_memory())) {
        log_info("releasing the ", ref ? "t2va/fl2va" : "ref2va", " transformer: it and the ",
                 workflow_name(r.workflow), " one do not fit the device together");
        other.reset();
      }
    }
    ResidencyPlan next = choose_plan(r);
    if (next.transformer_streaming) next.transformer_streaming->counters = std::make_shared<BlockStreamingCounters>();
    plan = std::move(next);
    apply_plan();
  }
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::open(const EngineOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->snapshot = Snapshot::discover(options.model_dir);
  const Snapshot& s = impl->snapshot;
  auto missing = s.missing_for(Workflow::T2VA);
  if (!missing.empty()) {
    std::string m;
    for (const auto& x : missing) m += (m.empty() ? "" : ", ") + x;
    fail(options.model_dir, ": the snapshot cannot serve t2va: missing ", m, " (h3 --info -d ", options.model_dir,
         " shows what it holds)");
  }
  impl->dit_config = load_dit_config(s.transformer);
  impl->transformer_has_gates = dit_has_gates(Checkpoint::open(s.transformer.weights), impl->dit_config,
                                              s.transformer.layout);
  impl->vae_config = load_video_vae_config(s.vae);
  impl->audio_config = load_audio_vae_config(s.audio_vae);
  impl->text_config = load_text_encoder_config(s.text_encoder);
  impl->video_shift = load_scheduler_config(s, false);
  impl->audio_shift = load_scheduler_config(s, true);
  impl->canvas = load_canvas_config(s.index_file);
  if (s.processor.present) impl->image_processor = load_image_processor_config(s.processor);
  // The components must fit each other.
  const auto& d = impl->dit_config;
  H3_CHECK(d.text_dim == impl->text_config.text.hidden_size, options.model_dir, ": the transformer's text_dim (",
           d.text_dim, ") differs from the text encoder's hidden size (", impl->text_config.text.hidden_size, ")");
  H3_CHECK(d.in_channels == impl->vae_config.latent_channels, options.model_dir, ": the transformer's in_channels (",
           d.in_channels, ") differs from the video VAE's latent_channels (", impl->vae_config.latent_channels, ")");
  H3_CHECK(d.audio_in_channels == impl->audio_config.latent_channels, options.model_dir,
           ": the transformer's audio_in_channels (", d.audio_in_channels,
           ") differs from the audio VAE's latent_channels (", impl->audio_config.latent_channels, ")");
  H3_CHECK(options.vae_tile >= 1 && options.vae_tile_overlap >= 0 && options.vae_tile_overlap < options.vae_tile,
           "the VAE tile must be positive and its overlap in [0, tile), got tile ", options.vae_tile, ", overlap ",
           options.vae_tile_overlap);
  // The device is chosen now (cheap), so a bad --device fails before any weights load.
  impl->backend = make_backend(options.device);
  if (options.memory_budget_bytes) set_device_memory_limit(*impl->backend, options.memory_budget_bytes);
  impl->dit_precision = resolve_dit_precision(options.precision, *impl->backend);
  if (options.gpus.size() > 1) {
    const std::string what = gpu_option_text(options.gpus);
    if (const auto problem = gpu_group_problem(what, options.gpus, d.num_attention_heads,
                                               impl->backend->device() == Device::CPU, cuda_device_count(),
                                               nccl_available()))
      fail(*problem);
    fail(what, ": a generation does not run the transformer on several GPUs yet (issue 21: the sequence-parallel "
         "transformer is parallel/dit_group.h's, measured by bench_dit --gpus N); run it on one GPU");
  }
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

std::unique_ptr<Engine> Engine::from_parts(EngineParts&& parts) {
  const EngineParts::Makers& mk = parts.makers;
  H3_CHECK(parts.backend && parts.tokenizer && (parts.text || mk.text) && (parts.dit || mk.dit) &&
               (parts.vae || mk.vae) && (parts.audio || mk.audio),
           "Engine::from_parts: every component (backend, tokenizer, text encoder, transformer, both VAEs) or its "
           "maker is needed");
  H3_CHECK(parts.configs || (parts.text && parts.dit && parts.vae && parts.audio),
           "Engine::from_parts: components made later need their configurations");
  auto impl = std::make_unique<Impl>();
  impl->options = parts.options;
  impl->from_parts = true;
  impl->dit_config = parts.dit ? parts.dit->config() : parts.configs->dit;
  impl->transformer_has_gates = parts.dit && parts.dit->has_gates();  // random makers make no gates
  impl->vae_config = parts.vae ? parts.vae->config() : parts.configs->vae;
  impl->audio_config = parts.audio ? parts.audio->config() : parts.configs->audio;
  impl->text_config = parts.text ? parts.text->config() : parts.configs->text;
  impl->makers = std::move(parts.makers);
  if (parts.options.memory_budget_bytes) {
    // Counted from here on: what the parts already hold would escape the count.
    H3_CHECK(!parts.text && !parts.dit && !parts.vae && !parts.audio && !parts.vision && !parts.vae_encoder,
             "Engine::from_parts: a memory budget needs parts made by their makers, after it is set");
    set_device_memory_limit(*parts.backend, parts.options.memory_budget_bytes);
  }
  impl->video_shift = parts.video_shift;
  impl->audio_shift = parts.audio_shift;
  // Members are destroyed in reverse order of declaration: the models (declared after the backend) go first.
  impl->backend = std::move(parts.backend);
  impl->tokenizer = std::move(parts.tokenizer);
  impl->text = std::move(parts.text);
  impl->dit = std::move(parts.dit);
  impl->vae = std::move(parts.vae);
  impl->audio = std::move(parts.audio);
  impl->vision = std::move(parts.vision);
  impl->vae_encoder = std::move(parts.vae_encoder);
  impl->dit_ref = std::move(parts.dit_ref);
  impl->audio_encoder = std::move(parts.audio_encoder);
  impl->image_processor = parts.image_processor;
  impl->video_processor = parts.video_processor;
  impl->canvas = parts.canvas;
  H3_CHECK(impl->dit_config.text_dim == impl->text_config.text.hidden_size &&
               impl->dit_config.in_channels == impl->vae_config.latent_channels &&
               impl->dit_config.audio_in_channels == impl->audio_config.latent_channels,
           "Engine::from_parts: the components do not fit each other (text_dim / latent channels)");
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

std::string Engine::memory_plan(const GenerationRequest& request) const {
  const ResolvedRequest r = validate(request);
  const MemoryPlan p = impl_->plan_memory(r);
  std::string out;
  for (const auto& w : p.weights) out += cat("weights ", w.what, ": ", format_gb(w.bytes), "\n");
  for (const auto& ph : p.phases) out += cat("working memory, ", ph.what, ": ", format_gb(ph.bytes), "\n");
  out += cat("peak: ", format_gb(p.peak_bytes()), " (", p.peak_phase, ")\n");
  return out;
}

std::string Engine::residency_plan(const GenerationRequest& request) const {
  const ResolvedRequest r = validate(request);
  try {
    const ResidencyPlan p = impl_->choose_plan(r);
    return p.budget_bytes ? describe(p) : "resident (no budget)";
  } catch (const Error& e) {
    return e.what();
  }
}

ResolvedRequest Engine::validate(const GenerationRequest& request, RequestCheck scope) const {
  const Impl& m = *impl_;
  ResolvedRequest r = validate_request(request, m.canvas_multiple(), scope, m.dit_config.num_layers, m.default_steps());
  if (request.token_reduction) token_reduction_window(m.dit_config.num_layers);  // its environment's rules
  if (const FastH3Plan plan = m.attention_plan(request); plan.kind != DitAttentionKind::kDense) {
    H3_CHECK(!request.token_reduction, "--token-reduction and the sparse attention cannot be combined (this ",
             "checkpoint's default is the sparse attention: give --attention dense with --token-reduction)");
    r.attention_plan = describe_fasth3_plan(plan);
  }
  if (scope == RequestCheck::Whole) m.check_request_prompt(request.prompt);
  validate_video_vae_decode(m.vae_config, Tensor::empty({m.vae_config.latent_channels, 1, 1, 1}, DType::F32),
                            m.tile_options());
  if (!workflow_served(r.workflow)) fail("h3 does not serve the ", workflow_name(r.workflow), " workflow yet.");
  if (r.workflow == Workflow::T2VA) return r;
  if (m.from_parts && (!m.vision || !m.vae_encoder || !m.image_processor))
    fail("this engine was built without the vision tower, the VAE encoder or the image processor that ",
         workflow_name(r.workflow), " needs");
  if (m.from_parts && r.workflow == Workflow::Ref2VA && (!m.dit_ref || !m.audio_encoder))
    fail("this engine was built without the ref2va transformer or the audio VAE encoder that ref2va needs");
  // What the snapshot lacks, then the media's headers.
  if (!m.from_parts) {
    const std::vector<std::string> missing = m.snapshot.missing_for(r.workflow);
    std::string list;
    for (const std::string& x : missing) list += (list.empty() ? "" : ", ") + x;
    if (!missing.empty())
      fail("The snapshot cannot serve ", workflow_name(r.workflow),
           r.workflow == Workflow::FL2VA ? " (keyframes)" : " (references)", ": it lacks ", list, ".");
  }
  if (r.workflow == Workflow::Ref2VA) {
    const std::vector<std::string> problems = reference_media_problems(request, r.frames, m.reference_rules());
    std::string msg;
    for (const std::string& p : problems) msg += (msg.empty() ? "" : "\n") + p;
    if (!msg.empty()) throw Error(msg);
    if (!m.video_processor && !m.from_parts &&
        std::any_of(request.references.begin(), request.references.end(),
                    [](const ReferenceInput& x) { return x.kind == ReferenceInput::Kind::Video; }))
      m.video_processor = load_video_processor_config(m.snapshot.processor);
    return r;
  }
  // fl2va: the keyframes' headers, the canvas they resolve, the encoder's rules.
  std::vector<std::pair<int64_t, int64_t>> sizes;
  for (const std::optional<ImageInput>* k : {&request.first_frame, &request.last_frame})
    if (*k) sizes.push_back(keyframe_size(**k));
  if (!request.width) {
    const auto [w, h] = sizes.front();  // the geometry anchor: the first keyframe given
    const CanvasSize c = resolve_canvas_size(static_cast<double>(w), static_cast<double>(h), m.canvas_multiple(),
                                             m.canvas.canvas_short_edge, m.canvas.canvas_max_pixels,
                                             cat("the ", request.first_frame ? "first" : "last", " keyframe (", w,
                                                 "x", h, " pixels)"));
    r.width = c.width;
    r.height = c.height;
    r.render_width = request.render_width.value_or(r.width);
    r.render_height = request.render_height.value_or(r.height);
    throw_if_problems(render_canvas_problems(request, r.width, r.height, m.canvas_multiple()));
  }
  validate_video_vae_encode(m.vae_config, 1, r.render_height, r.render_width, m.encode_tile_options());
  return r;
}

void Engine::load() { impl_->ensure_loaded(Workflow::T2VA); }

GenerationResult Engine::generate(const GenerationRequest& request, const GenerateCallbacks& cb,
                                  const InjectedNoise& noise) {
  Impl& m = *impl_;
  // The flag is checked inside every phase, between the models' units of work (util/cancel.h), and between phases.
  const CancelScope cancel_scope(cb.cancel);
  GenerationResult out;
  out.request = validate(request);
  const GenerationRequest& r = out.request.request;
  auto progress = [&](Phase p, int64_t done, int64_t total) {
    if (cb.on_progress) cb.on_progress({p, done, total});
  };
  // Wall time, device time between two marks of the backend's timeline, and the allocator's high-water mark.
  // `units`: what the phase's progress counts to (passes, frames; 1 for a phase reported only as begun).
  auto timed = [&](Phase p, int64_t units, auto&& fn) {
    throw_if_cancelled();
    Backend& be = *m.backend;
    be.reset_peak_memory();
    const auto t0 = Clock::now();
    const auto d0 = be.mark_time();
    progress(p, 0, units);
    fn();
    const auto d1 = be.mark_time();
    be.synchronize();
    PhaseTiming t{p, seconds_since(t0), be.memory_stats().peak};
    t.device_seconds = be.device_seconds(*d0, *d1);
    out.timings.push_back(t);
  };

  m.fit_memory(out.request);
  out.residency.plan = residency_kind_name(m.plan.kind);
  out.residency.description = m.plan.budget_bytes ? describe(m.plan) : "resident (no budget)";
  out.residency.budget_bytes = m.plan.budget_bytes;
  out.residency.planned_peak_bytes = m.plan.peak_bytes;
  const Workflow workflow = out.request.workflow;
  const std::vector<KeyframeAnchor> anchors = keyframe_anchors(r);
  const size_t visual_conditions =
      anchors.size() + std::count_if(r.references.begin(), r.references.end(), [](const ReferenceInput& x) {
        return x.kind != ReferenceInput::Kind::Audio;
      });
  for (const auto& [what, given] : {std::pair{"augmentation", noise.conditions.size()},
                                    std::pair{"posterior", noise.encodes.size()}})
    H3_CHECK(given == 0 || given == visual_conditions, "the injected noise holds ", given, " ", what,
             " draws for the request's ", visual_conditions, " visual conditions");
  {
    throw_if_cancelled();
    const auto t0 = Clock::now();
    if (m.needs_loading(workflow)) progress(Phase::Load, 0, 1);  // a resident model announces no load
    m.backend->reset_peak_memory();
    if (m.ensure_loaded(workflow, r.layers.has_value()))
      out.timings.push_back({Phase::Load, seconds_since(t0), m.backend->memory_stats().peak});
  }
  const Conditioning* conditioning = nullptr;
  const auto timed_phase = [&](Phase p, const std::function<void()>& fn) { timed(p, 1, fn); };
  conditioning = &m.condition(out.request, noise.encodes, out.prompt_cache_hit, timed_phase);
  check_finite(conditioning->embeds, "text encoder", Phase::EncodePrompt);
  for (const Tensor& z : conditioning->visual_latents)
    check_finite(z, "video VAE encoder", workflow == Workflow::Ref2VA ? Phase::EncodeReferences : Phase::EncodeKeyframes);
  for (const Tensor& a : conditioning->reference_audio) check_finite(a, "audio VAE encoder", Phase::EncodeReferences);
  out.prompt_tokens = static_cast<int64_t>(conditioning->presentation.ids.size());

  // The model and the VAEs run on the render canvas (the output canvas without --render-*).
  const auto& d = m.dit_config;
  const LatentGeometry g = LatentGeometry::make(out.request.render_width, out.request.render_height,
                                                out.request.frames, d.patch_size, d.in_channels, d.audio_in_channels,
                                                m.vae_config.spatial_ratio());
  LayoutSpec spec;
  spec.text_tags = conditioning->presentation.tags;
  spec.target = g;
  spec.keyframes = anchors;
  spec.references = conditioning->reference_blocks;
  spec.spatial_rope_scale = out.request.spatial_rope_scale();
  const PackedLayout layout = build_layout(spec);
  // Named, not a structured binding: the denoise lambda below captures them (clang before 16 refuses bindings there).
  const std::pair<FlowSchedule, FlowSchedule> schedules = make_schedules(out.request.steps, m.video_shift.shift,
                                                                               m.audio_shift.shift);
  const FlowSchedule& video_schedule = schedules.first;
  const FlowSchedule& audio_schedule = schedules.second;
  NoiseInputs noise_inputs;
  noise_inputs.seed = r.seed;
  noise_inputs.conditions = noise.conditions;
  noise_inputs.video = noise.video;
  noise_inputs.audio = noise.audio;
  // The passes that evaluate the model: every one, or fewer with --reuse.
  const std::vector<bool> evaluated = evaluated_passes(out.request.steps, r.reuse);
  // The transformer's blocks for this request: --layers ranks them over the request's timesteps, and blocks an
  // earlier request dropped load again; the time goes to the load phase.
  // Resident already unless the plan loads the transformer for the denoise only (released after it).
  std::optional<Impl::HeldParts> held_transformer;
  held_transformer.emplace(
      m, std::vector<EnginePart>{workflow == Workflow::Ref2VA ? EnginePart::ReferenceTransformer : EnginePart::Transformer},
      r.layers.has_value());
  Dit& transformer = m.transformer_for(workflow);
  if (r.layers || static_cast<int64_t>(transformer.resident_blocks().size()) != d.num_layers) {
    throw_if_cancelled();
    progress(Phase::Load, 0, 1);
    m.backend->reset_peak_memory();
    const auto t0 = Clock::now();
    // Ranked over the timesteps the denoise evaluates (with --reuse, its evaluated passes'; h3.c ranks over every
    // pass's): one table build serves the ranking and the passes, where two lists would build them twice.
    transformer.select_blocks(TimestepPlan::make(layout, video_schedule, audio_schedule, evaluated).timesteps(),
                              r.layers);
    const PhaseTiming load{Phase::Load, seconds_since(t0), m.backend->memory_stats().peak};
    auto earlier = std::find_if(out.timings.begin(), out.timings.end(),
                                [](const PhaseTiming& t) { return t.phase == Phase::Load; });
    if (earlier == out.timings.end()) {
      out.timings.push_back(load);
    } else {
      earlier->wall_seconds += load.wall_seconds;
      earlier->peak_device_bytes = std::max(earlier->peak_device_bytes, load.peak_device_bytes);
    }
  }
  DitRequestSettings dit_settings;
  dit_settings.options.layers = r.layers;
  dit_settings.options.core_reuse = r.core_reuse;
  dit_settings.options.token_reduction = r.token_reduction;
  if (const FastH3Plan attention = m.attention_plan(r); attention.kind != DitAttentionKind::kDense)
    dit_settings.options.sparse_attention = DitRequestOptions::SparseAttention{attention.tile_elems, attention.vsa};
  dit_settings.video_timesteps = video_schedule.timesteps();
  dit_settings.target_video_grid = {g.latent_frames / g.patch[0], g.patch_rows(), g.patch_cols()};
  SamplerOptions so;
  so.evaluated = evaluated;
  so.on_pass = [&](const PassProgress& p) {
    progress(Phase::Denoise, p.pass + 1, p.passes);
    if (cb.on_pass) cb.on_pass(p);
  };
  DenoiseResult latents;
  // What the transformer's ring moved during the denoise (the streamed model adds to the plan's counters).
  const std::shared_ptr<BlockStreamingCounters> counters =
      m.plan.transformer_streaming ? m.plan.transformer_streaming->counters : nullptr;
  const BlockStreamingCounters before = counters ? *counters : BlockStreamingCounters{};
  timed(Phase::Denoise, out.request.steps, [&] {
    DitVelocityModel model(transformer, dit_settings);
    latents = denoise(model, layout, conditioning->embeds, video_schedule, audio_schedule, g,
                      initial_state(g, conditioning->visual_latents, noise_inputs, conditioning->reference_audio), so);
  });
  out.residency.passes = std::count(evaluated.begin(), evaluated.end(), true);
  if (counters) {
    transformer.streaming_stats();  // measures (and so counts) the last pass
    out.residency.copied_bytes = counters->bytes_copied - before.bytes_copied;
    out.residency.copy_seconds = counters->copy_seconds - before.copy_seconds;
    out.residency.stall_seconds = counters->stall_seconds - before.stall_seconds;
  }
  check_finite(latents.latents, "transformer", Phase::Denoise);
  check_finite(latents.audio_latents, "transformer", Phase::Denoise);
  held_transformer.reset();
  if (cb.on_latents && !cb.on_latents(latents.latents, latents.audio_latents)) return out;

  std::optional<Impl::HeldParts> decoder;
  decoder.emplace(m, std::vector<EnginePart>{EnginePart::VideoDecoder});
  timed(Phase::DecodeVideo, m.vae->frames_for_latents(g.latent_frames), [&] {
    const Tensor z = latents.latents.reshape({g.latent_channels, g.latent_frames, g.latent_height, g.latent_width});
    const int64_t height = out.request.height, width = out.request.width;
    out.video = Tensor::empty({3, m.vae->frames_for_latents(g.latent_frames), height, width}, DType::F32);
    const int64_t plane = height * width, frames = out.video.dim(1);
    m.vae->decode_streaming(z, m.tile_options(), [&](const Tensor& decoded, int64_t first) {
      // A render canvas' frames are upscaled to the output canvas here, before anything sees them.
      const Tensor f = out.request.renders_smaller() ? scale_frames_lanczos(decoded, width, height) : decoded;
      const int64_t n = f.dim(1);
      // Into the final frame buffer, in parallel (a chunk is up to 200 MB; the device works on the next meanwhile).
      const float* src = f.ptr<float>();
      float* dst = out.video.ptr<float>();
      parallel_for(0, 3 * n, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t cf = p0; cf < p1; ++cf) {
          const int64_t c = cf / n, k = cf % n;
          std::memcpy(dst + (c * frames + first + k) * plane, src + cf * plane, plane * sizeof(float));
        }
      });
      progress(Phase::DecodeVideo, first + n, frames);
      if (cb.on_frames) cb.on_frames(f, first);
      throw_if_cancelled();
    });
  });
  check_finite(out.video, "video VAE decoder", Phase::DecodeVideo);
  decoder.reset();
  decoder.emplace(m, std::vector<EnginePart>{EnginePart::AudioDecoder});
  timed(Phase::DecodeAudio, 1, [&] { out.audio = m.audio->decode(latents.audio_latents); });
  decoder.reset();
  check_finite(out.audio, "audio VAE decoder", Phase::DecodeAudio);
  out.sample_rate = m.audio_config.sampling_rate;
  out.fps = kFps;
  ++m.stats.generations;
  return out;
}

Tensor Engine::preview_frame(const Tensor& latents, int64_t width, int64_t height) {
  Impl& m = *impl_;
  const Impl::HeldParts decoder(m, {EnginePart::VideoDecoder});
  H3_CHECK(latents.ndim() == 5 && latents.dim(0) == 1, "preview_frame: latents must be (1, C, F, Hl, Wl), got ",
           latents.str());
  const int64_t C = latents.dim(1), F = latents.dim(2), H = latents.dim(3), W = latents.dim(4);
  // The chunk holding the middle frame decodes from latent window [5c, 5c + 7); its frame 8 lies past the 5-frame
  // cross-fade with the previous chunk, so the window alone gives it exactly.
  const int64_t frames = m.vae->frames_for_latents(F);
  const int64_t window = std::min<int64_t>(F, 7);
  int64_t c = std::min<int64_t>((frames / 2) / 17, std::max<int64_t>((F - window) / 5, 0));
  Tensor w = Tensor::empty({C, window, H, W}, DType::F32);
  const Tensor src = latents.to_f32();
  for (int64_t ch = 0; ch < C; ++ch)
    std::copy_n(src.ptr<float>() + (ch * F + 5 * c) * H * W, window * H * W, w.ptr<float>() + ch * window * H * W);
  Tensor v = m.vae->decode(w, m.tile_options());
  const int64_t pick = std::min<int64_t>(8, v.dim(1) - 1), plane = v.dim(2) * v.dim(3);
  Tensor frame = Tensor::empty({3, 1, v.dim(2), v.dim(3)}, DType::F32);
  for (int64_t ch = 0; ch < 3; ++ch)
    std::copy_n(v.ptr<float>() + (ch * v.dim(1) + pick) * plane, plane, frame.ptr<float>() + ch * plane);
  const bool upscale = width > 0 && height > 0 && (width != frame.dim(3) || height != frame.dim(2));
  return upscale ? scale_frames_lanczos(frame, width, height) : frame;
}

bool workflow_served(Workflow w) { return !served_parts(w).empty(); }

std::string Engine::device_description() const { return describe(detect_compute_device()); }
void Engine::set_precision(const std::string& precision) {
  H3_CHECK(!impl_->from_parts || precision == impl_->options.precision,
           "this engine was built from components in memory: its precision cannot change");
  const DitPrecision p = resolve_dit_precision(precision, *impl_->backend);
  if (precision == impl_->options.precision) return;
  impl_->options.precision = precision;
  impl_->dit_precision = p;
  impl_->dit.reset();  // loaded again, in the new precision, by the next request that needs them
  impl_->dit_ref.reset();
}

const std::string& Engine::precision() const { return impl_->options.precision; }

std::string Engine::backend_name() const { return impl_->backend ? impl_->backend->name() : "none"; }
std::string Engine::op_profile_report() { return impl_->backend ? impl_->backend->op_profile_report() : std::string(); }
EngineStats Engine::stats() const { return impl_->stats; }
size_t Engine::prompt_cache_size() const { return impl_->prompt_cache.size(); }
std::vector<PromptCacheEntry> Engine::prompt_cache_entries() const {
  std::vector<PromptCacheEntry> out;
  for (const Conditioning& c : impl_->prompt_cache)
    out.push_back({c.key.prompt, static_cast<int64_t>(c.presentation.ids.size()),
                   static_cast<int64_t>(c.key.keyframes.size()), static_cast<int64_t>(c.key.references.size())});
  return out;
}
void Engine::clear_prompt_cache() { impl_->prompt_cache.clear(); }
int64_t Engine::canvas_multiple() const { return impl_->canvas_multiple(); }

}  // namespace h3

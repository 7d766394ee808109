// ref2va end to end on the CPU against the reference pipeline (tests/fixtures/e2e_ref2va, tools/reference/
// fx_e2e_ref2va.py): for one image; an image, a video with its soundtrack and a standalone sound (the ordered clock);
// a silent video; a replaced soundtrack; a 30 fps video with a 44.1 kHz soundtrack beside a 48 kHz sound — the
// references as the setup step normalizes them (bytes of the pictures and frames, the waveforms' samples), their
// conditioning latents (the reference's posterior draws injected), the clean audio rows, the conditioner rows of the
// presentation, and the decoded video and soundtrack of `h3 tool generate` given the reference's noise.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/snapshot.h"
#include "models/audio_vae/audio_vae_encoder.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/video_processor.h"
#include "models/qwen3vl/vision_model.h"
#include "models/video_vae/encoder.h"
#include "pipeline/references.h"
#include "pipeline/request_json.h"
#include "generate_tool_parity.h"
#include "test_source_dir.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "util/mapped_file.h"

namespace h3 {
namespace {

namespace fs = std::filesystem;

const char* const kCases[] = {"one_image", "image_video_audio", "silent_video", "replaced_soundtrack", "resampling"};

std::string fixture_dir() { return test_source_dir() + "/tests/fixtures/e2e_ref2va"; }

// Bytes that differ between our 8-bit pixels and the reference's (any integer dtype).
int64_t differing_bytes(const std::vector<uint8_t>& ours, const Tensor& ref) {
  if (static_cast<int64_t>(ours.size()) != ref.numel()) return -1;
  int64_t n = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) n += static_cast<int64_t>(ref.at(i)) != ours[static_cast<size_t>(i)];
  return n;
}

// The conditioning recipe rounds every sampled latent to float16 (spec/video_vae.md §7.1), so a float32 difference
// far below the encoder's 1e-5 can still put a value on the other side of a float16 rounding boundary, and that value
// then differs by one float16 ulp of its unnormalized value (divided by latents_std). Checks that every element agrees
// to 1e-5 of the latent's RMS or differs by that one ulp, and that at most 1 % of them do the latter; returns how many
// did.
int64_t expect_equal_but_float16_flips(const Tensor& ours, const Tensor& ref, const VideoVaeConfig& vae,
                                       const std::string& what) {
  EXPECT_EQ(ours.shape(), ref.shape()) << what;
  if (ours.shape() != ref.shape()) return -1;
  double rms = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) rms += static_cast<double>(ref.at(i)) * ref.at(i);
  rms = std::sqrt(rms / static_cast<double>(ref.numel()));
  const int64_t C = ref.dim(1), per_channel = ref.numel() / C;
  int64_t flips = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double diff = std::abs(static_cast<double>(ours.at(i)) - ref.at(i));
    if (diff <= 1e-5 * rms) continue;
    const int64_t c = (i / per_channel) % C;
    const double std_c = vae.latents_std.empty() ? 1.0 : vae.latents_std[c];
    const double mean_c = vae.latents_mean.empty() ? 0.0 : vae.latents_mean[c];
    const double raw = std::abs(ref.at(i) * std_c + mean_c);
    const double ulp = std::ldexp(1.0, std::max(std::ilogb(std::max(raw, 6.1e-5)), -14) - 10) / std_c;
    EXPECT_NEAR(diff, ulp, 1e-3 * ulp) << what << " element " << i << ": " << ours.at(i) << " vs " << ref.at(i);
    ++flips;
  }
  EXPECT_LE(flips, ref.numel() / 100) << what;
  return flips;
}

bool has(const SafetensorsFile& f, const std::string& name) { return f.find(name) != nullptr; }

class EndToEndRef2va : public testing::TestWithParam<const char*> {
 protected:
  std::string case_dir() const { return fixture_dir() + "/" + GetParam(); }
};

// The stages, one component at a time, so a failure says where the paths part.
TEST_P(EndToEndRef2va, StagesMatchTheReference) {
  const Snapshot s = Snapshot::discover(fixture_dir() + "/model");
  const GenerationRequest request = read_request_json(case_dir() + "/request.json");
  const auto expected = SafetensorsFile::open(case_dir() + "/expected.safetensors");
  const auto noise = SafetensorsFile::open(case_dir() + "/noise.safetensors");
  const VideoVaeConfig vae = load_video_vae_config(s.vae);
  const DitConfig dit = load_dit_config(s.transformer_ref);
  const TextEncoderConfig text_config = load_text_encoder_config(s.text_encoder);
  ReferenceRules rules;
  rules.canvas_multiple = vae.spatial_ratio() * dit.patch_size[1];
  rules.canvas = load_canvas_config(s.index_file);
  rules.audio_rate = static_cast<int>(load_audio_vae_config(s.audio_vae).sampling_rate);
  rules.temporal_patch = text_config.vision.temporal_patch_size;
  const int64_t frames = request.frames.value();

  // 1. The setup step: every reference normalized as the reference normalizes it — pictures and frames byte for
  // byte (Pillow's LANCZOS, the 24 fps resampling), waveforms (torchaudio's resampling) within the media family's
  // bound, compared on the stored excerpts (head, tail, every 61st sample) and the float64 sums.
  ASSERT_TRUE(reference_media_problems(request, frames, rules).empty());
  const std::vector<NormalizedReference> refs =
      normalize_references(request, frames, request.width.value(), request.height.value(), rules);
  for (size_t i = 0; i < refs.size(); ++i) {
    const std::string prefix = "normalized_" + std::to_string(i);
    const NormalizedReference& n = refs[i];
    if (n.kind == ReferenceInput::Kind::Image) {
      const Tensor want = expected->tensor(prefix + "_image");
      ASSERT_EQ(want.dim(0), n.image.height) << prefix;
      ASSERT_EQ(want.dim(1), n.image.width) << prefix;
      EXPECT_EQ(differing_bytes(n.image.rgb, want), 0) << prefix;
    }
    if (n.kind == ReferenceInput::Kind::Video) {
      const Tensor want = expected->tensor(prefix + "_frames");
      ASSERT_EQ(want.dim(0), n.frames.frames) << prefix;
      ASSERT_EQ(want.dim(1), n.frames.height) << prefix;
      ASSERT_EQ(want.dim(2), n.frames.width) << prefix;
      EXPECT_EQ(differing_bytes(n.frames.rgb, want), 0) << prefix;
    }
    if (!has(*expected, prefix + "_audio_head")) {
      EXPECT_FALSE(n.has_audio()) << prefix;
      continue;
    }
    ASSERT_TRUE(n.has_audio()) << prefix;
    const Tensor head = expected->tensor(prefix + "_audio_head").to_f32();
    const Tensor strided = expected->tensor(prefix + "_audio_strided").to_f32();
    const Tensor sums = expected->tensor(prefix + "_audio_sums_f64");
    ASSERT_EQ(n.audio->channels, 2);
    const int64_t S = n.audio->frames(), edge = head.dim(1), stride = (S + strided.dim(1) - 1) / strided.dim(1);
    ASSERT_EQ(strided.dim(1), (S + stride - 1) / stride) << prefix << ": " << S << " samples";
    Tensor ours_head = Tensor::empty(head.shape(), DType::F32), ours_strided = Tensor::empty(strided.shape(), DType::F32);
    for (int c = 0; c < 2; ++c) {
      const float* x = n.audio->channel(c);
      for (int64_t k = 0; k < edge; ++k) ours_head.ptr<float>()[c * edge + k] = x[k];
      for (int64_t k = 0; k < strided.dim(1); ++k) ours_strided.ptr<float>()[c * strided.dim(1) + k] = x[k * stride];
      double sum = 0, sq = 0;
      for (int64_t k = 0; k < S; ++k) {
        sum += x[k];
        sq += static_cast<double>(x[k]) * x[k];
      }
      EXPECT_NEAR(sq, sums.at(c * 2 + 1), 1e-5 * sums.at(c * 2 + 1)) << prefix << " channel " << c;
      EXPECT_NEAR(sum, sums.at(c * 2), 1e-5 * std::sqrt(sums.at(c * 2 + 1) * S)) << prefix << " channel " << c;
    }
    // The media family's bound for torchaudio's resampling (float64 sums here, float32 convolution there).
    EXPECT_LE(rel_l2(ours_head, head), 2e-7) << prefix;
    EXPECT_LE(rel_l2(ours_strided, strided), 2e-7) << prefix;
  }

  // 2. The encodes: the visual references with the reference's posterior draws (the encoder's parity bound), the
  // sounds' clean rows (the audio VAE encoder's).
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::unique_ptr<VideoVaeEncoder> encoder = VideoVaeEncoder::load(*be, s.vae);
  std::unique_ptr<AudioVaeEncoder> audio_encoder = AudioVaeEncoder::load(*be, s.audio_vae);
  size_t visual = 0, sounds = 0;
  for (const NormalizedReference& n : refs) {
    if (n.kind != ReferenceInput::Kind::Audio) {
      const std::string i = std::to_string(visual++);
      const Tensor eps = noise->tensor("encode_noise_" + i).to_f32();
      Tensor ours;
      if (n.kind == ReferenceInput::Kind::Image) {
        ours = encoder->encode_visual_condition(n.image, &eps);
      } else {
        ours = encoder->encode_visual_condition(reference_video_encode_clip(n.frames, vae), &eps);
      }
      const Tensor ref = expected->tensor("condition_latents_" + i).to_f32();
      expect_equal_but_float16_flips(ours, ref, vae, "condition " + i);
    }
    if (!n.has_audio()) continue;
    const std::string j = std::to_string(sounds++);
    const Tensor ours = audio_encoder->encode_reference(waveform_tensor(*n.audio));
    const Tensor ref = expected->tensor("audio_condition_latents_" + j).to_f32();
    ASSERT_EQ(ours.shape(), ref.shape()) << "audio condition " << j;
    EXPECT_LE(rel_l2(ours, ref), 1e-5) << "audio condition " << j;
  }
  EXPECT_FALSE(has(*expected, "condition_latents_" + std::to_string(visual)));
  EXPECT_FALSE(has(*expected, "audio_condition_latents_" + std::to_string(sounds)));

  // 3. The presentation's tags and the conditioner rows (vision tower per modality, DeepStack, M-RoPE positions).
  const Tokenizer tokenizer = Tokenizer::from_file(s.tokenizer.dir);
  const ImageProcessorConfig image_processor = load_image_processor_config(s.processor);
  const VideoProcessorConfig video_processor = load_video_processor_config(s.processor);
  const ReferenceVisionInputs in =
      reference_vision_inputs(refs, image_processor, &video_processor, rules.temporal_patch);
  std::unique_ptr<QwenVisionModel> vision = QwenVisionModel::load(*be, s.text_encoder);
  std::optional<VisionFeatures> image_features, video_features;
  if (in.images) image_features = vision->encode(*in.images);
  if (in.videos) video_features = vision->encode(*in.videos);
  const Presentation pres = present_ref2va(tokenizer, request.prompt, in.presented, image_processor.merge_size);
  const Tensor tags = expected->tensor("text_token_tags");
  ASSERT_EQ(static_cast<int64_t>(pres.tags.size()), tags.numel());
  for (int64_t k = 0; k < tags.numel(); ++k) ASSERT_EQ(pres.tags[k], static_cast<int64_t>(tags.at(k))) << "row " << k;
  std::unique_ptr<QwenTextModel> text = QwenTextModel::load(*be, s.text_encoder);
  const Tensor embeds = text->encode(pres.ids, image_features ? &*image_features : nullptr,
                                     video_features ? &*video_features : nullptr);
  const Tensor ref_embeds = expected->tensor("prompt_embeds").to_f32();
  ASSERT_EQ(embeds.shape(), ref_embeds.shape());
  EXPECT_LE(rel_l2(embeds, ref_embeds), 1e-5);  // the vision family's bound for hidden_states[50]
}

// The whole generation through `h3 tool generate`: within the 1e-4 of the reference's float32 output (both
// paths are float32; the picture and frame resizes are bit-exact, and the resampled sounds agree to 2e-7 — far inside
// the 1e-3 allowance for resampling, so one bound serves every case).
TEST_P(EndToEndRef2va, GenerateToolMatchesTheReference) {
  expect_generate_tool_matches(fixture_dir() + "/model", case_dir(), std::string("ref2va_") + GetParam(), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Cases, EndToEndRef2va, testing::ValuesIn(kCases));

}  // namespace
}  // namespace h3

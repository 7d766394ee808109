// fl2va end to end on the CPU against the reference pipeline (tests/fixtures/e2e_fl2va, tools/reference/
// fx_e2e_fl2va.py): the keyframes as placed on the canvas, their conditioning latents (the reference's posterior draw
// injected), the conditioner rows, and the decoded video and soundtrack of `h3 tool generate` given the reference's
// noise — for a first keyframe at the canvas size, a last keyframe stretched, both (stretched and cover-cropped), and
// both with the canvas resolved from the first.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/snapshot.h"
#include "media/image_input.h"
#include "models/dit/dit.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/vision_model.h"
#include "models/video_vae/encoder.h"
#include "pipeline/dit_velocity.h"
#include "pipeline/keyframes.h"
#include "pipeline/sampler.h"
#include "pipeline/request_json.h"
#include "generate_tool_parity.h"
#include "test_source_dir.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "util/mapped_file.h"

namespace h3 {
namespace {

namespace fs = std::filesystem;

const char* const kCases[] = {"first_at_canvas", "last_stretched", "both_stretched_cropped", "both_resolved_canvas"};

std::string fixture_dir() { return test_source_dir() + "/tests/fixtures/e2e_fl2va"; }

class EndToEndFl2va : public testing::TestWithParam<const char*> {
 protected:
  std::string case_dir() const { return fixture_dir() + "/" + GetParam(); }
};

// The stages, one component at a time, so a failure says where the paths part.
TEST_P(EndToEndFl2va, StagesMatchTheReference) {
  const Snapshot s = Snapshot::discover(fixture_dir() + "/model");
  const GenerationRequest request = read_request_json(case_dir() + "/request.json");
  const auto expected = SafetensorsFile::open(case_dir() + "/expected.safetensors");
  const auto noise = SafetensorsFile::open(case_dir() + "/noise.safetensors");
  const auto meta = nlohmann::json::parse(read_text_file(case_dir() + "/case.json"));

  // 1. The keyframes on the canvas: byte for byte (LANCZOS stretch, cover crop).
  std::optional<Rgb8Image> first, last;
  if (request.first_frame) first = read_image_file(request.first_frame->path);
  if (request.last_frame) last = read_image_file(request.last_frame->path);
  const VideoVaeConfig vae = load_video_vae_config(s.vae);
  const DitConfig dit = load_dit_config(s.transformer);
  const KeyframePlacement placed = place_keyframes(first ? &*first : nullptr, last ? &*last : nullptr, request.width,
                                                   request.height, vae.spatial_ratio() * dit.patch_size[1],
                                                   load_canvas_config(s.index_file));
  EXPECT_EQ(placed.canvas.width, meta["canvas"][0].get<int64_t>());
  EXPECT_EQ(placed.canvas.height, meta["canvas"][1].get<int64_t>());
  ASSERT_EQ(placed.keyframes.size(), meta["keyframe_anchors"].size());
  std::vector<Rgb8Image> images;
  for (size_t i = 0; i < placed.keyframes.size(); ++i) {
    const Rgb8Image& k = placed.keyframes[i].image;
    EXPECT_EQ(keyframe_anchor_name(placed.keyframes[i].anchor), meta["keyframe_anchors"][i].get<std::string>());
    const Tensor want = expected->tensor("keyframe_" + std::to_string(i));  // (H, W, 3)
    ASSERT_EQ(want.numel(), static_cast<int64_t>(k.rgb.size()));
    int64_t differing = 0;
    for (int64_t j = 0; j < want.numel(); ++j) differing += static_cast<int64_t>(want.at(j)) != k.rgb[j];
    EXPECT_EQ(differing, 0) << "keyframe " << i;
    images.push_back(k);
  }

  std::unique_ptr<Backend> be = make_cpu_backend();
  // 2. The conditioning latents with the reference's posterior draw: the encoder's parity bound (1e-5) is far above
  // what one keyframe through the tiny VAE gives; the fp16 rounding can move a value by one fp16 ulp, which the
  // bound also covers at this size.
  std::unique_ptr<VideoVaeEncoder> encoder = VideoVaeEncoder::load(*be, s.vae);
  for (size_t i = 0; i < images.size(); ++i) {
    const Tensor eps = noise->tensor("encode_noise_" + std::to_string(i)).to_f32();
    const Tensor ours = encoder->encode_visual_condition(images[i], &eps);
    const Tensor ref = expected->tensor("condition_latents_" + std::to_string(i)).to_f32();
    ASSERT_EQ(ours.shape(), ref.shape());
    EXPECT_LE(rel_l2(ours, ref), 1e-5) << "condition " << i;
  }

  // 3. The conditioner rows of the fl2va presentation (vision tower, DeepStack, M-RoPE positions).
  const Tokenizer tokenizer = Tokenizer::from_file(s.tokenizer.dir);
  const ImageProcessorConfig processor = load_image_processor_config(s.processor);
  const QwenVisionInputs inputs = prepare_images(processor, images);
  std::unique_ptr<QwenVisionModel> vision = QwenVisionModel::load(*be, s.text_encoder);
  std::unique_ptr<QwenTextModel> text = QwenTextModel::load(*be, s.text_encoder);
  const VisionFeatures features = vision->encode(inputs);
  const Presentation p = present_fl2va(tokenizer, request.prompt, inputs.grids, processor.merge_size);
  const Tensor tags = expected->tensor("text_token_tags");
  ASSERT_EQ(static_cast<int64_t>(p.tags.size()), tags.numel());
  for (int64_t j = 0; j < tags.numel(); ++j) ASSERT_EQ(p.tags[j], static_cast<int64_t>(tags.at(j))) << "row " << j;
  const Tensor embeds = text->encode(p.ids, &features);
  const Tensor ref_embeds = expected->tensor("prompt_embeds").to_f32();
  ASSERT_EQ(embeds.shape(), ref_embeds.shape());
  EXPECT_LE(rel_l2(embeds, ref_embeds), 1e-5);  // the vision family's bound for hidden_states[50]

  // 4. The fl2va denoise from the reference's conditioning and noises (its prompt rows and tags, its condition
  // latents and augmentation draws, its latents and audio latents): the sampler parity's bound, float32 both sides.
  LayoutSpec spec;
  for (int64_t j = 0; j < tags.numel(); ++j) spec.text_tags.push_back(static_cast<int64_t>(tags.at(j)));
  spec.target = LatentGeometry::make(placed.canvas.width, placed.canvas.height, request.frames.value(),
                                     dit.patch_size, dit.in_channels, dit.audio_in_channels, vae.spatial_ratio());
  for (const PlacedKeyframe& k : placed.keyframes) spec.keyframes.push_back(k.anchor);
  std::vector<Tensor> conditions;
  NoiseInputs draws;
  for (size_t i = 0; i < placed.keyframes.size(); ++i) {
    conditions.push_back(expected->tensor("condition_latents_" + std::to_string(i)).to_f32());
    draws.conditions.push_back(noise->tensor("condition_noise_" + std::to_string(i)).to_f32());
  }
  draws.video = noise->tensor("latents").to_f32();
  draws.audio = noise->tensor("audio_latents").to_f32();
  std::unique_ptr<Dit> transformer = Dit::load(*be, s.transformer);
  DitVelocityModel model(*transformer);
  const auto [video_schedule, audio_schedule] = make_schedules(request.steps.value());  // the fixture's passes
  const DenoiseResult out = denoise(model, build_layout(spec), ref_embeds, video_schedule, audio_schedule, spec.target,
                                    initial_state(spec.target, conditions, draws));
  const Tensor ref_latents = expected->tensor("latents").to_f32(), ref_audio = expected->tensor("audio_latents").to_f32();
  ASSERT_EQ(out.latents.shape(), ref_latents.shape());
  ASSERT_EQ(out.audio_latents.shape(), ref_audio.shape());
  EXPECT_LE(rel_l2(out.latents, ref_latents), 1e-5);
  EXPECT_LE(rel_l2(out.audio_latents, ref_audio), 1e-5);
}

// The whole generation through `h3 tool generate`: within the 1e-4 of the reference's float32 output (both
// paths are float32; the processor's resize is bit-exact, so no looser bound for it).
TEST_P(EndToEndFl2va, GenerateToolMatchesTheReference) {
  expect_generate_tool_matches(fixture_dir() + "/model", case_dir(), std::string("fl2va_") + GetParam(), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Cases, EndToEndFl2va, testing::ValuesIn(kCases));

}  // namespace
}  // namespace h3

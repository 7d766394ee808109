// libFuzzer target: every component config parser on arbitrary JSON must either accept it or throw h3::Error.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "io/config.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  auto attempt = [&](auto&& f) {
    try {
      f();
    } catch (const h3::Error&) {
    }
  };
  attempt([&] { h3::parse_dit_config(j, "fuzz", false); });
  attempt([&] { h3::parse_dit_config(j, "fuzz", true); });
  attempt([&] { h3::parse_video_vae_config(j, "fuzz"); });
  attempt([&] { h3::parse_original_video_vae_config(j, j, "fuzz"); });
  attempt([&] { h3::parse_audio_vae_config(j, "fuzz"); });
  attempt([&] { h3::parse_original_audio_vae_config(j, j, "fuzz"); });
  attempt([&] { h3::parse_text_encoder_config(j, "fuzz"); });
  attempt([&] { h3::parse_scheduler_config(j, "fuzz", 12.0); });
  attempt([&] { h3::parse_image_processor_config(j, "fuzz"); });
  attempt([&] { h3::parse_video_processor_config(j, "fuzz"); });
  attempt([&] { h3::parse_canvas_config(j, "fuzz"); });
  return 0;
}

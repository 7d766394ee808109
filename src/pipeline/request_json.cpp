#include "pipeline/request_json.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/error.h"

namespace h3 {

namespace {

using json = nlohmann::json;

const char* type_name(const json& v) { return v.type_name(); }

std::string resolve_path(const std::string& base_dir, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute() || base_dir.empty()) return p;
  return (std::filesystem::path(base_dir) / p).string();
}

int64_t integer(const json& v, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer())
    fail("\"", key, "\" must be an integer, got ", type_name(v), v.is_number() ? cat(" ", v.dump()) : "");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail("\"", key, "\" must be between ", lo, " and ", hi, ", got ", v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) fail("\"", key, "\" must be between ", lo, " and ", hi, ", got ", x);
  return x;
}

std::string path_value(const json& v, const std::string& key, const std::string& base_dir) {
  if (!v.is_string()) fail("\"", key, "\" must be a file path (a string), got ", type_name(v));
  const std::string p = v.get<std::string>();
  if (p.empty()) fail("\"", key, "\" must name a file, got an empty string");
  return resolve_path(base_dir, p);
}

ReferenceInput reference(const json& v, size_t index, const std::string& base_dir) {
  const std::string where = cat("references[", index, "]");
  if (!v.is_object()) fail("\"", where, "\" must be an object such as {\"image\": path}, got ", type_name(v));
  for (const auto& [key, value] : v.items())
    if (key != "image" && key != "video" && key != "audio")
      fail("\"", where, "\" has the unknown key \"", key, "\" (a reference takes \"image\", \"video\" or \"audio\")");
  ReferenceInput r;
  const bool image = v.contains("image"), video = v.contains("video"), audio = v.contains("audio");
  if (image) {
    if (video || audio) fail("\"", where, "\": an image reference takes no \"video\" or \"audio\"");
    r.kind = ReferenceInput::Kind::Image;
    r.path = path_value(v["image"], where + ".image", base_dir);
  } else if (video) {
    r.kind = ReferenceInput::Kind::Video;
    r.path = path_value(v["video"], where + ".video", base_dir);
    if (audio) {
      const json& a = v["audio"];
      if (a.is_boolean() && !a.get<bool>()) {
        r.soundtrack = ReferenceInput::Soundtrack::None;
      } else if (a.is_string()) {
        r.soundtrack = ReferenceInput::Soundtrack::Replaced;
        r.soundtrack_path = path_value(a, where + ".audio", base_dir);
      } else {
        fail("\"", where, ".audio\" must be false (a silent video) or the path of a replacement soundtrack, got ",
             a.dump());
      }
    }
  } else if (audio) {
    r.kind = ReferenceInput::Kind::Audio;
    r.path = path_value(v["audio"], where + ".audio", base_dir);
  } else {
    fail("\"", where, "\" must hold \"image\", \"video\" or \"audio\"");
  }
  return r;
}

}  // namespace

GenerationRequest parse_request_json(std::string_view text, const std::string& base_dir) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail("a request must be a JSON object, got ", type_name(j));
  GenerationRequest r;
  constexpr int64_t kIntMax = std::numeric_limits<int64_t>::max();
  bool has_prompt = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "prompt") {
      if (!value.is_string()) fail("\"prompt\" must be a string, got ", type_name(value));
      r.prompt = value.get<std::string>();
      has_prompt = true;
    } else if (key == "width") {
      r.width = integer(value, key, 0, kIntMax);
    } else if (key == "height") {
      r.height = integer(value, key, 0, kIntMax);
    } else if (key == "frames") {
      r.frames = integer(value, key, 0, kIntMax);
    } else if (key == "seconds") {
      if (!value.is_number()) fail("\"seconds\" must be a number, got ", type_name(value));
      r.seconds = value.get<double>();
    } else if (key == "steps") {
      r.steps = integer(value, key, 0, kIntMax);
    } else if (key == "seed") {
      if (!value.is_number_unsigned())
        fail("\"seed\" must be an integer between 0 and 18446744073709551615, got ", value.dump());
      r.seed = value.get<uint64_t>();
    } else if (key == "first_frame") {
      r.first_frame = ImageInput::file(path_value(value, key, base_dir));
    } else if (key == "last_frame") {
      r.last_frame = ImageInput::file(path_value(value, key, base_dir));
    } else if (key == "reuse") {
      r.reuse = integer(value, key, 0, kIntMax);
    } else if (key == "render_width") {
      r.render_width = integer(value, key, 0, kIntMax);
    } else if (key == "render_height") {
      r.render_height = integer(value, key, 0, kIntMax);
    } else if (key == "use_reference_rope") {
      if (!value.is_boolean()) fail("\"use_reference_rope\" must be true or false, got ", value.dump());
      r.use_reference_rope = value.get<bool>();
    } else if (key == "references") {
      if (!value.is_array()) fail("\"references\" must be an array, got ", type_name(value));
      for (size_t i = 0; i < value.size(); ++i) r.references.push_back(reference(value[i], i, base_dir));
    } else {
      fail("unknown key \"", key,
           "\" (a request takes prompt, width, height, frames, seconds, steps, seed, first_frame, last_frame, "
           "references, reuse, render_width, render_height, use_reference_rope)");
    }
  }
  if (!has_prompt) fail("a request needs a \"prompt\"");
  return r;
}

GenerationRequest read_request_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot read the request file");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return parse_request_json(ss.str(), std::filesystem::path(path).parent_path().string());
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

}  // namespace h3

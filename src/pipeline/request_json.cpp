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

std::string relative_path(const std::string& base_dir, const std::string& p) {
  if (base_dir.empty()) return p;
  const std::filesystem::path rel = std::filesystem::path(p).lexically_relative(base_dir);
  const bool inside = !rel.empty() && *rel.begin() != "..";
  return inside ? rel.string() : p;
}

json reference_json(const ReferenceInput& r, const std::string& base_dir) {
  const std::string path = relative_path(base_dir, r.path);
  switch (r.kind) {
    case ReferenceInput::Kind::Image: return {{"image", path}};
    case ReferenceInput::Kind::Audio: return {{"audio", path}};
    case ReferenceInput::Kind::Video: break;
  }
  json v = {{"video", path}};
  if (r.soundtrack == ReferenceInput::Soundtrack::None) v["audio"] = false;
  if (r.soundtrack == ReferenceInput::Soundtrack::Replaced) v["audio"] = relative_path(base_dir, r.soundtrack_path);
  return v;
}

// A client's value in a message: its JSON text, cut after kShownMax characters, bytes that are not UTF-8 replaced (a
// form's values are the client's bytes, not parsed JSON).
constexpr size_t kShownMax = 40;
std::string shown(const json& v) {
  constexpr auto replace = json::error_handler_t::replace;
  if (v.is_string() && v.get_ref<const std::string&>().size() > kShownMax)
    return json(v.get_ref<const std::string&>().substr(0, kShownMax)).dump(-1, ' ', false, replace) + "...";
  return v.dump(-1, ' ', false, replace);
}

bool boolean(const json& value, const std::string& key) {
  if (!value.is_boolean()) fail("\"", key, "\" must be true or false, got ", value.dump());
  return value.get<bool>();
}

}  // namespace

std::string request_json_string(const json& v, const std::string& key) {
  if (!v.is_string()) fail("\"", key, "\" must be a string, got ", type_name(v));
  return v.get<std::string>();
}

int64_t request_json_count(const json& v, const std::string& key) {
  constexpr int64_t kIntMax = std::numeric_limits<int64_t>::max();
  if (!v.is_number_integer())
    fail("\"", key, "\" must be an integer, got ", type_name(v), v.is_number() ? cat(" ", v.dump()) : "");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kIntMax))
    fail("\"", key, "\" must be between 0 and ", kIntMax, ", got ", v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < 0) fail("\"", key, "\" must be between 0 and ", kIntMax, ", got ", x);
  return x;
}

double request_json_number(const json& v, const std::string& key) {
  if (!v.is_number()) fail("\"", key, "\" must be a number, got ", type_name(v));
  return v.get<double>();
}

AttentionChoice request_json_attention(const json& v, const std::string& key) {
  if (v != "dense" && v != "sparse") fail("\"", key, "\" must be \"dense\" or \"sparse\", got ", shown(v));
  return v == "dense" ? AttentionChoice::Dense : AttentionChoice::Sparse;
}

uint64_t request_json_seed(const json& v, const std::string& key) {
  if (!v.is_number_unsigned())
    fail("\"", key, "\" must be an integer between 0 and 18446744073709551615, got ", v.dump());
  return v.get<uint64_t>();
}

std::string request_to_json(const GenerationRequest& r, const std::string& base_dir) {
  H3_CHECK(r.reference_image_size == ReferenceImageSize::Max,
           "a request with --ref-image-size match has no JSON form");
  json j = {{"prompt", r.prompt}, {"seed", r.seed}};
  if (r.steps) j["steps"] = *r.steps;
  if (r.width) j["width"] = *r.width;
  if (r.height) j["height"] = *r.height;
  if (r.frames) j["frames"] = *r.frames;
  if (r.seconds) j["seconds"] = *r.seconds;
  for (const auto& [key, k] : {std::pair{"first_frame", &r.first_frame}, std::pair{"last_frame", &r.last_frame}})
    if (*k) {
      H3_CHECK((*k)->is_file(), "a request with an in-memory keyframe has no JSON form");
      j[key] = relative_path(base_dir, (*k)->path);
    }
  if (!r.references.empty()) {
    json refs = json::array();
    for (const ReferenceInput& x : r.references) {
      H3_CHECK(!x.in_memory(), "a request with in-memory references has no JSON form");
      refs.push_back(reference_json(x, base_dir));
    }
    j["references"] = std::move(refs);
  }
  // The speed controls, where they leave the default.
  if (r.reuse != 1) j["reuse"] = r.reuse;
  if (r.render_width) j["render_width"] = *r.render_width;
  if (r.render_height) j["render_height"] = *r.render_height;
  if (r.use_reference_rope) j["use_reference_rope"] = true;
  if (r.layers) j["layers"] = *r.layers;
  if (r.core_reuse != 1) j["core_reuse"] = r.core_reuse;
  if (r.token_reduction) j["token_reduction"] = true;
  if (r.attention) j["attention"] = attention_choice_name(*r.attention);
  if (r.sparsity) j["sparsity"] = *r.sparsity;
  return j.dump();
}

GenerationRequest parse_request_json(std::string_view text, const std::string& base_dir) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail("a request must be a JSON object, got ", type_name(j));
  GenerationRequest r;
  bool has_prompt = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "prompt") {
      r.prompt = request_json_string(value, key);
      has_prompt = true;
    } else if (key == "width") {
      r.width = request_json_count(value, key);
    } else if (key == "height") {
      r.height = request_json_count(value, key);
    } else if (key == "frames") {
      r.frames = request_json_count(value, key);
    } else if (key == "seconds") {
      r.seconds = request_json_number(value, key);
    } else if (key == "steps") {
      r.steps = request_json_count(value, key);
    } else if (key == "seed") {
      r.seed = request_json_seed(value, key);
    } else if (key == "first_frame") {
      r.first_frame = ImageInput::file(path_value(value, key, base_dir));
    } else if (key == "last_frame") {
      r.last_frame = ImageInput::file(path_value(value, key, base_dir));
    } else if (key == "reuse") {
      r.reuse = request_json_count(value, key);
    } else if (key == "render_width") {
      r.render_width = request_json_count(value, key);
    } else if (key == "render_height") {
      r.render_height = request_json_count(value, key);
    } else if (key == "use_reference_rope") {
      r.use_reference_rope = boolean(value, key);
    } else if (key == "layers") {
      r.layers = request_json_count(value, key);
    } else if (key == "core_reuse") {
      r.core_reuse = request_json_count(value, key);
    } else if (key == "token_reduction") {
      r.token_reduction = boolean(value, key);
    } else if (key == "attention") {
      r.attention = request_json_attention(value, key);
    } else if (key == "sparsity") {
      r.sparsity = request_json_number(value, key);
    } else if (key == "references") {
      if (!value.is_array()) fail("\"references\" must be an array, got ", type_name(value));
      for (size_t i = 0; i < value.size(); ++i) r.references.push_back(reference(value[i], i, base_dir));
    } else {
      fail("unknown key \"", key,
           "\" (a request takes prompt, width, height, frames, seconds, steps, seed, first_frame, last_frame, "
           "references, reuse, render_width, render_height, use_reference_rope, layers, core_reuse, token_reduction, "
           "attention, sparsity)");
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

#include "server/video_request.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <set>

#include "pipeline/request_json.h"
#include "util/error.h"

namespace h3::server {

namespace {

using json = nlohmann::json;

constexpr const char* kFieldList = "prompt, model, size, seconds, frames, steps, seed, attention, sparsity";
constexpr const char* kFileList =
    "input_reference, last_frame, reference_image, reference_video, reference_silent_video, reference_audio";
constexpr size_t kQuotedTextMax = 40;

// Client text inside a message: quoted, cut short.
std::string excerpt(std::string_view text) {
  if (text.size() <= kQuotedTextMax) return cat("\"", text, "\"");
  return cat("\"", text.substr(0, kQuotedTextMax), "...\"");
}

// A number sent as text (every multipart value, and OpenAI's "seconds"), read with JSON's number syntax; any other
// value is returned unchanged for the field's own check to judge.
json numeric(const json& v, const std::string& key, const char* noun) {
  if (!v.is_string()) return v;
  const std::string& text = v.get_ref<const std::string&>();
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_number()) fail("\"", key, "\" must be ", noun, ", got the text ", excerpt(text));
  return parsed;
}

bool is_file_field(const std::string& name) {
  static const std::set<std::string> names = {"input_reference",        "last_frame",      "reference_image",
                                              "reference_video",        "reference_audio", "reference_silent_video"};
  return names.count(name) > 0;
}

void apply_field(VideoSubmission& s, const std::string& key, const json& v) {
  GenerationRequest& r = s.request;
  if (key == "prompt") {
    r.prompt = request_json_string(v, key);
  } else if (key == "model") {
    (void)request_json_string(v, key);
  } else if (key == "size") {
    const auto [w, h] = parse_video_size(request_json_string(v, key));
    r.width = w;
    r.height = h;
  } else if (key == "seconds") {
    r.seconds = request_json_number(numeric(v, key, "a number"), key);
  } else if (key == "frames") {
    r.frames = request_json_count(numeric(v, key, "an integer"), key);
  } else if (key == "steps") {
    r.steps = request_json_count(numeric(v, key, "an integer"), key);
  } else if (key == "seed") {
    r.seed = request_json_seed(numeric(v, key, "an integer"), key);
    s.seed_given = true;
  } else if (key == "attention") {
    r.attention = request_json_attention(v, key);
  } else if (key == "sparsity") {
    r.sparsity = request_json_number(numeric(v, key, "a number"), key);
  } else if (is_file_field(key)) {
    fail("\"", key, "\" is a file: send it as a file part of a multipart/form-data request");
  } else {
    fail("unknown field \"", key, "\" (a video request takes ", kFieldList, "; files: ", kFileList, ")");
  }
}

void add_upload(VideoSubmission& s, FormPart&& part) {
  if (part.content.empty()) fail("the file \"", part.name, "\" (", excerpt(part.filename), ") is empty");
  Upload u;
  u.field = part.name;
  u.filename = std::move(part.filename);
  u.content = std::move(part.content);
  GenerationRequest& r = s.request;
  auto once = [&](const std::optional<ImageInput>& slot) {
    if (slot) fail("\"", u.field, "\" was given twice; a video has one ", u.field == "last_frame" ? "last" : "first",
                   " keyframe");
  };
  if (u.field == "input_reference") {
    once(r.first_frame);
    u.role = Upload::Role::FirstFrame;
    r.first_frame = ImageInput::file("");
  } else if (u.field == "last_frame") {
    once(r.last_frame);
    u.role = Upload::Role::LastFrame;
    r.last_frame = ImageInput::file("");
  } else {
    ReferenceInput ref;
    if (u.field == "reference_image") {
      ref.kind = ReferenceInput::Kind::Image;
    } else if (u.field == "reference_audio") {
      ref.kind = ReferenceInput::Kind::Audio;
    } else {
      ref.kind = ReferenceInput::Kind::Video;
      if (u.field == "reference_silent_video") ref.soundtrack = ReferenceInput::Soundtrack::None;
    }
    u.role = Upload::Role::Reference;
    u.reference = r.references.size();
    r.references.push_back(std::move(ref));
  }
  s.uploads.push_back(std::move(u));
}

void require_prompt(const std::set<std::string>& seen) {
  if (!seen.count("prompt")) fail("a video request needs a \"prompt\"");
}

}  // namespace

VideoSubmission parse_video_json(std::string_view body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    fail("the request body is not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail("a video request must be a JSON object, got ", j.type_name());
  VideoSubmission s;
  std::set<std::string> seen;
  for (const auto& [key, value] : j.items()) {
    apply_field(s, key, value);
    seen.insert(key);
  }
  require_prompt(seen);
  return s;
}

VideoSubmission parse_video_form(std::vector<FormPart> parts) {
  VideoSubmission s;
  std::set<std::string> seen;
  for (FormPart& part : parts) {
    if (is_file_field(part.name)) {
      add_upload(s, std::move(part));
      continue;
    }
    if (!part.filename.empty())
      fail("\"", part.name, "\" is a text field, not a file (the files are ", kFileList, ")");
    if (!seen.insert(part.name).second) fail("the field \"", part.name, "\" was given twice");
    apply_field(s, part.name, json(std::move(part.content)));
  }
  require_prompt(seen);
  return s;
}

void set_upload_paths(VideoSubmission& s, const std::vector<std::string>& paths) {
  H3_CHECK(paths.size() == s.uploads.size(), "set_upload_paths: ", paths.size(), " paths for ", s.uploads.size(),
           " uploads");
  GenerationRequest& r = s.request;
  for (size_t i = 0; i < paths.size(); ++i) {
    const Upload& u = s.uploads[i];
    switch (u.role) {
      case Upload::Role::FirstFrame: r.first_frame = ImageInput::file(paths[i]); break;
      case Upload::Role::LastFrame: r.last_frame = ImageInput::file(paths[i]); break;
      case Upload::Role::Reference: r.references.at(u.reference).path = paths[i]; break;
    }
  }
}

std::pair<int64_t, int64_t> parse_video_size(std::string_view text) {
  auto side = [&](std::string_view digits, int64_t& out) {
    if (digits.empty() || digits.front() < '0' || digits.front() > '9') return false;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc() && end == digits.data() + digits.size();
  };
  const size_t x = text.find_first_of("xX");
  int64_t w = 0, h = 0;
  if (x == std::string_view::npos || !side(text.substr(0, x), w) || !side(text.substr(x + 1), h))
    fail("\"size\" must be WIDTHxHEIGHT in pixels, such as \"864x480\", got ", excerpt(text));
  return {w, h};
}

ListQuery parse_list_query(const std::vector<std::pair<std::string, std::string>>& params) {
  ListQuery q;
  std::set<std::string> seen;
  for (const auto& [key, value] : params) {
    if (!seen.insert(key).second) fail("the query parameter \"", key, "\" was given twice");
    if (key == "limit") {
      q.limit = request_json_count(numeric(json(value), key, "an integer"), key);
      if (q.limit < 1 || q.limit > kMaxListLimit)
        fail("\"limit\" must be between 1 and ", kMaxListLimit, ", got ", q.limit);
    } else if (key == "after") {
      if (value.empty()) fail("\"after\" must name a video id, got an empty value");
      q.after = value;
    } else if (key == "order") {
      if (value != "asc" && value != "desc") fail("\"order\" must be \"asc\" or \"desc\", got ", excerpt(value));
      q.ascending = value == "asc";
    } else {
      fail("unknown query parameter \"", key, "\" (the list takes limit, after, order)");
    }
  }
  return q;
}

}  // namespace h3::server

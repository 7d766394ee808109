// What clients send to `h3 serve` (server/http_api.h), read into plain data: the body of POST /v1/videos and the
// query of GET /v1/videos. No HTTP library and no files here (the server saves the uploads), so that a fuzz target
// (fuzz/fuzz_http_request.cpp) covers every parser of the server's outside input.
//
// The body follows OpenAI's video API (openai-node src/resources/videos.ts, VideoCreateParams; vLLM-Omni serves
// MiniMax-H3 with the same shape): a JSON object, or a multipart/form-data body (what the OpenAI clients send).
//   prompt    string, required
//   model     string, accepted and not checked: one server serves one model (the job reports the served one)
//   size      "WxH" in pixels, e.g. "864x480"; absent: the engine's default canvas, or the first keyframe's
//   seconds   the duration (OpenAI's field is the string "4"; a JSON number is taken too); rounded up as the engine
//             rounds durations
//   frames    the frame count instead of seconds (ours)
//   steps     denoising passes (ours); absent: the checkpoint's (a FastH3 student's grid, models/dit/dit_fasth3.h)
//   seed      integer (ours); absent: the server draws one and reports it
//   attention "dense" or "sparse" (ours, FastH3's VSA-H3); absent: the checkpoint's
//   sparsity  with the sparse attention: the fraction of video key tiles skipped, [0, 1) (ours)
// In a multipart body every value is text: numbers are written in JSON's number syntax ("4", "4.5", "42").
// Files, multipart only, in the order of their parts:
//   input_reference          a picture: the video starts on it (the fl2va first keyframe)
//   last_frame               a picture: the video ends on it (ours)
//   reference_image, reference_video (with its soundtrack), reference_silent_video, reference_audio
//                            the ref2va references (ours), in the order of their parts
// Unknown fields, wrong types and unreadable numbers are refused with one sentence naming the field; the engine's
// own rules (ranges, combinations) are checked afterwards by Engine::validate.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeline/request.h"

namespace h3::server {

// One part of a multipart/form-data body, as the HTTP library delivers it.
struct FormPart {
  std::string name, filename, content_type, content;
};

// A file the request reads, uploaded with it.
struct Upload {
  enum class Role { FirstFrame, LastFrame, Reference };
  Role role = Role::FirstFrame;
  size_t reference = 0;  // Role::Reference: its index in GenerationRequest::references
  std::string field;     // the part's name
  std::string filename;  // as the client named it (messages only)
  std::string content;
};

struct VideoSubmission {
  GenerationRequest request;  // the uploads' paths are empty until set_upload_paths
  bool seed_given = false;
  std::vector<Upload> uploads;  // in the order of their parts
};

VideoSubmission parse_video_json(std::string_view body);
VideoSubmission parse_video_form(std::vector<FormPart> parts);
// Points the request at the files the uploads were saved to (paths[i] holds uploads[i]).
void set_upload_paths(VideoSubmission& s, const std::vector<std::string>& paths);

// "WxH" (decimal, no sign, no spaces; 'x' or 'X'), the `size` field's form; {width, height}.
std::pair<int64_t, int64_t> parse_video_size(std::string_view text);

// GET /v1/videos?limit=N&after=ID&order=asc|desc (OpenAI's ConversationCursorPage): newest first by default.
inline constexpr int64_t kDefaultListLimit = 20;
inline constexpr int64_t kMaxListLimit = 100;
struct ListQuery {
  int64_t limit = kDefaultListLimit;
  std::string after;  // the id the page starts after; empty: the first page
  bool ascending = false;
};
ListQuery parse_list_query(const std::vector<std::pair<std::string, std::string>>& params);

}  // namespace h3::server

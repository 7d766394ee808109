// A generation request written as JSON (`h3 tool generate --request`; the parity harness's contract, FL2VA issue):
//
//   {"prompt": str, "width": int?, "height": int?, "frames": int?, "seconds": number?, "steps": int?, "seed": int?,
//    "first_frame": path?, "last_frame": path?, "references": [...]?,
//    "reuse": int?, "render_width": int?, "render_height": int?, "use_reference_rope": bool?,  (speed controls)
//    "layers": int?, "core_reuse": int?, "token_reduction": bool?, "attention": "dense"|"sparse"?,
//    "sparsity": number?}  (FastH3)
//
// `steps` are model passes (the reference's num_inference_steps − 1); absent optional fields take the request's
// defaults (absent steps: the checkpoint's). References, in order: {"image": p}, {"video": p} (with its soundtrack),
// {"video": p, "audio": false}
// (silent), {"video": p, "audio": p2} (soundtrack replaced), {"audio": p}. Paths are relative to `base_dir` (the
// request file's folder) unless absolute. Unknown keys, wrong types and out-of-range integers are refused with one
// sentence naming the key; the request's own rules are checked later by validate_request.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "pipeline/request.h"

namespace h3 {

GenerationRequest parse_request_json(std::string_view text, const std::string& base_dir);
// The same from a file; messages name it.
GenerationRequest read_request_json(const std::string& path);

// The request as parse_request_json reads it back (every field written, paths inside `base_dir` relative to it), for
// a request kept on disk (the server's job store). Requests with in-memory media or ReferenceImageSize::Match have
// no JSON form and are refused.
std::string request_to_json(const GenerationRequest& r, const std::string& base_dir);

// The request's fields one by one, with parse_request_json's rules and messages (naming `key`), for other JSON shapes
// of a request (the server's video API, server/video_request.h).
std::string request_json_string(const nlohmann::json& v, const std::string& key);
int64_t request_json_count(const nlohmann::json& v, const std::string& key);  // an integer in 0..INT64_MAX
double request_json_number(const nlohmann::json& v, const std::string& key);
AttentionChoice request_json_attention(const nlohmann::json& v, const std::string& key);  // "dense" or "sparse"
uint64_t request_json_seed(const nlohmann::json& v, const std::string& key);

}  // namespace h3

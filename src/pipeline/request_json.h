// A generation request written as JSON (`h3 tool generate --request`; the parity harness's contract, FL2VA issue):
//
//   {"prompt": str, "width": int?, "height": int?, "frames": int?, "seconds": number?, "steps": int?, "seed": int?,
//    "first_frame": path?, "last_frame": path?, "references": [...]?,
//    "reuse": int?, "render_width": int?, "render_height": int?, "use_reference_rope": bool?}   (speed controls)
//
// `steps` are model passes (the reference's num_inference_steps − 1); absent optional fields take the request's
// defaults. References, in order: {"image": p}, {"video": p} (with its soundtrack), {"video": p, "audio": false}
// (silent), {"video": p, "audio": p2} (soundtrack replaced), {"audio": p}. Paths are relative to `base_dir` (the
// request file's folder) unless absolute. Unknown keys, wrong types and out-of-range integers are refused with one
// sentence naming the key; the request's own rules are checked later by validate_request.
#pragma once
#include <string>
#include <string_view>

#include "pipeline/request.h"

namespace h3 {

GenerationRequest parse_request_json(std::string_view text, const std::string& base_dir);
// The same from a file; messages name it.
GenerationRequest read_request_json(const std::string& path);

}  // namespace h3

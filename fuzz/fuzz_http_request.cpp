// libFuzzer target: what clients send to `h3 serve` (server/video_request.h), then the request's rules. The first
// byte picks the parser: a JSON body, a multipart form's parts (records split by 0x1E, each "name 0x1F filename 0x1F
// content"), the size string, or the list query ("key=value&...").
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/video_request.h"
#include "util/error.h"

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t at; (at = s.find(sep)) != std::string_view::npos; s.remove_prefix(at + 1)) out.push_back(s.substr(0, at));
  out.push_back(s);
  return out;
}

void check(h3::server::VideoSubmission s) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < s.uploads.size(); ++i) paths.push_back("upload-" + std::to_string(i));
  h3::server::set_upload_paths(s, paths);
  (void)h3::request_problems(s.request);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: check(h3::server::parse_video_json(in)); break;
      case 1: {
        std::vector<h3::server::FormPart> parts;
        for (std::string_view record : split(in, '\x1e')) {
          const std::vector<std::string_view> f = split(record, '\x1f');
          parts.push_back({std::string(f[0]), f.size() > 1 ? std::string(f[1]) : "", "",
                           f.size() > 2 ? std::string(f[2]) : ""});
        }
        check(h3::server::parse_video_form(std::move(parts)));
        break;
      }
      case 2: (void)h3::server::parse_video_size(in); break;
      case 3: {
        std::vector<std::pair<std::string, std::string>> params;
        for (std::string_view pair : split(in, '&')) {
          const size_t eq = pair.find('=');
          params.emplace_back(std::string(pair.substr(0, eq)),
                              eq == std::string_view::npos ? "" : std::string(pair.substr(eq + 1)));
        }
        (void)h3::server::parse_list_query(params);
        break;
      }
    }
  } catch (const h3::Error&) {
  }
  return 0;
}

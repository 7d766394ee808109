// libFuzzer target: the config + snapshot layer as a whole (issue 22, item 3). A copy of a real tiny snapshot (the
// end-to-end fixture, written by diffusers' own save) is made once; each input then changes one of its config files —
// one value (any leaf or list, by index) replaced by a JSON value, or the whole text replaced — and runs what
// `h3 --info` and the engine's opening run on it, headers only: snapshot discovery, every config parsed, held
// against its weights' headers and validated, the manifests built and checked, the schedulers, the processor and the
// canvas rule. It must end in a report or an h3::Error, never crash, hang or allocate past libFuzzer's malloc limit.
//
// Input: byte 0 picks the file (kFiles), byte 1 the mode (even: one value; odd: the whole text, bytes 2..), bytes 2-3
// the value's index among the file's values (little endian, modulo their count), bytes 4.. the new value (JSON; a
// string when it does not parse).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/config.h"
#include "io/snapshot.h"
#include "tools/inspect.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* const kFiles[] = {"transformer/config.json",  "transformer_ref/config.json",
                              "vae/config.json",          "audio_vae/config.json",
                              "text_encoder/config.json", "scheduler/scheduler_config.json",
                              "audio_scheduler/scheduler_config.json", "processor/processor_config.json",
                              "modular_model_index.json"};
constexpr size_t kFileCount = sizeof kFiles / sizeof kFiles[0];

struct FuzzSnapshot {
  std::string root;
  std::vector<std::string> texts;                      // each file's original text
  std::vector<std::vector<json::json_pointer>> values;  // each file's values and lists, in document order
};

void collect(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) collect(it.value(), at / it.key(), out);
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) collect(j[i], at / i, out);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

const FuzzSnapshot& snapshot() {
  static const FuzzSnapshot s = [] {
    FuzzSnapshot out;
    std::string tmpl = (fs::temp_directory_path() / "h3-fuzz-snapshot-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) std::abort();
    out.root = tmpl + "/model";
    fs::copy(std::string(H3_SOURCE_DIR) + "/tests/fixtures/e2e/model", out.root, fs::copy_options::recursive);
    static const std::string cleanup = tmpl;
    std::atexit([] { fs::remove_all(cleanup); });
    for (const char* f : kFiles) {
      out.texts.push_back(read_file(out.root + "/" + f));
      out.values.emplace_back();
      collect(json::parse(out.texts.back()), json::json_pointer(), out.values.back());
    }
    return out;
  }();
  return s;
}

// What --info (headers only) and Engine::open read from a snapshot.
void run_snapshot_layer(const std::string& root) {
  const h3::Snapshot s = h3::Snapshot::discover(root);
  // Every component's config loader (as Engine::open calls them), its weights' summary and manifest, the
  // schedulers and the canvas rule; each problem a line of the report.
  (void)h3::inspect_components(s);
  if (s.processor.present) {
    const json p = h3::parse_json_file(s.processor.config_files.at(0));
    (void)h3::parse_image_processor_config(p, "processor");
    (void)h3::parse_video_processor_config(p, "processor");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const FuzzSnapshot& s = snapshot();
  if (size < 2) return 0;
  const size_t file = data[0] % kFileCount;
  const std::string path = s.root + "/" + kFiles[file];
  std::string text;
  if (data[1] % 2 == 1) {
    text.assign(reinterpret_cast<const char*>(data + 2), size - 2);
  } else {
    if (size < 4) return 0;
    const auto& values = s.values[file];
    const json::json_pointer& at = values[(data[2] | data[3] << 8) % values.size()];
    const std::string raw(reinterpret_cast<const char*>(data + 4), size - 4);
    json value = json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) value = raw;
    json doc = json::parse(s.texts[file]);
    doc[at] = std::move(value);
    text = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  write_file(path, text);
  try {
    run_snapshot_layer(s.root);
  } catch (const h3::Error&) {
  }
  write_file(path, s.texts[file]);
  return 0;
}

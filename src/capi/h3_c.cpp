// The C API (include/h3/h3_c.h) over h3::Engine: every entry point catches what the C++ side throws and turns it
// into a status and the thread's last-error sentence.
#include "h3/h3_c.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <new>
#include <string>
#include <vector>

#include "h3/h3.h"
#include "h3/version.h"
#include "media/mp4_writer.h"
#include "media/video_frames.h"
#include "tools/tool_args.h"
#include "util/error.h"

struct h3_engine {
  std::unique_ptr<h3::Engine> engine;
  std::atomic<bool> cancel{false};
  std::string description;
};

struct h3_request {
  h3::GenerationRequest request;
};

struct h3_result {
  h3::GenerationResult result;
  h3::Rgb8Video rgb8;
  std::vector<float> audio;  // planar stereo, cut to the video's length
  int64_t audio_samples = 0;
};

namespace {

using h3::Phase;
static_assert(static_cast<int>(Phase::Load) == H3_PHASE_LOAD &&
              static_cast<int>(Phase::ReadReferences) == H3_PHASE_READ_REFERENCES &&
              static_cast<int>(Phase::EncodePrompt) == H3_PHASE_ENCODE_PROMPT &&
              static_cast<int>(Phase::EncodeKeyframes) == H3_PHASE_ENCODE_KEYFRAMES &&
              static_cast<int>(Phase::EncodeReferences) == H3_PHASE_ENCODE_REFERENCES &&
              static_cast<int>(Phase::Denoise) == H3_PHASE_DENOISE &&
              static_cast<int>(Phase::DecodeVideo) == H3_PHASE_DECODE_VIDEO &&
              static_cast<int>(Phase::DecodeAudio) == H3_PHASE_DECODE_AUDIO,
              "h3_phase mirrors h3::Phase");
constexpr int kPhases = H3_PHASE_DECODE_AUDIO + 1;

thread_local std::string last_error;

h3_status failure(h3_status status, const std::string& message) {
  last_error = message;
  return status;
}

// Runs `body`, turning what it throws into a status: h3::Error into `error_status` (the kind of failure the entry
// point's errors are), cancellation, allocation failure and anything else into their own.
template <typename Body>
h3_status guarded(h3_status error_status, Body&& body) {
  try {
    body();
    return H3_OK;
  } catch (const h3::Cancelled& e) {
    return failure(H3_ERROR_CANCELLED, e.what());
  } catch (const h3::Error& e) {
    return failure(error_status, e.what());
  } catch (const std::bad_alloc&) {
    return failure(H3_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return failure(H3_ERROR_FAILED, e.what());
  } catch (...) {
    return failure(H3_ERROR_FAILED, "an unknown error");
  }
}

h3_status null_argument(const char* function, const char* argument) {
  return failure(H3_ERROR_INVALID_ARGUMENT, h3::cat(function, ": ", argument, " must not be NULL."));
}

// Returns H3_ERROR_INVALID_ARGUMENT from the entry point when the pointer argument `ptr` is null.
#define H3_C_REQUIRE(ptr)                               \
  do {                                                  \
    if (!(ptr)) return null_argument(__func__, #ptr);   \
  } while (0)

std::optional<h3::ImageInput>& keyframe_slot(h3_request* r, h3_keyframe which) {
  return which == H3_KEYFRAME_FIRST ? r->request.first_frame : r->request.last_frame;
}

// A C boolean argument: 0 or 1 (anything else is more likely a mistake than a yes).
h3_status check_switch(const char* function, const char* argument, int value) {
  if (value == 0 || value == 1) return H3_OK;
  return failure(H3_ERROR_INVALID_ARGUMENT, h3::cat(function, ": ", argument, " is 0 or 1, got ", value, "."));
}

bool is_keyframe(h3_keyframe which) { return which == H3_KEYFRAME_FIRST || which == H3_KEYFRAME_LAST; }

}  // namespace

extern "C" {

const char* h3_status_name(h3_status status) {
  switch (status) {
    case H3_OK: return "ok";
    case H3_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case H3_ERROR_INVALID_REQUEST: return "invalid request";
    case H3_ERROR_MODEL: return "model";
    case H3_ERROR_CANCELLED: return "cancelled";
    case H3_ERROR_OUT_OF_MEMORY: return "out of memory";
    case H3_ERROR_IO: return "i/o";
    case H3_ERROR_FAILED: return "failed";
  }
  return "unknown status";
}

const char* h3_last_error(void) { return last_error.c_str(); }

const char* h3_version(void) {
  static const std::string version = h3::build_info().version;
  return version.c_str();
}

const char* h3_build_info(void) {
  static const std::string text = h3::build_info_text();
  return text.c_str();
}

const char* h3_phase_name(h3_phase phase) {
  if (phase < 0 || phase >= kPhases) return nullptr;
  return h3::phase_name(static_cast<Phase>(phase));
}

h3_status h3_engine_open(const char* model_dir, const char* device, h3_engine** engine) {
  H3_C_REQUIRE(engine);
  *engine = nullptr;
  H3_C_REQUIRE(model_dir);
  const std::string device_name = device ? device : "auto";
  if (const std::optional<std::string> problem = h3::check_device_option(device_name))
    return failure(H3_ERROR_INVALID_ARGUMENT, *problem + ".");
  return guarded(H3_ERROR_MODEL, [&] {
    auto e = std::make_unique<h3_engine>();
    e->engine = h3::Engine::open({.model_dir = model_dir, .device = device_name});
    e->description = h3::cat(e->engine->backend_name(), " backend (", e->engine->device_description(), ")");
    *engine = e.release();
  });
}

void h3_engine_free(h3_engine* engine) { delete engine; }

const char* h3_engine_description(h3_engine* engine) { return engine ? engine->description.c_str() : ""; }

void h3_engine_cancel(h3_engine* engine) {
  if (engine) engine->cancel.store(true);
}

h3_request* h3_request_new(void) { return new (std::nothrow) h3_request(); }

void h3_request_free(h3_request* request) { delete request; }

h3_status h3_request_set_prompt(h3_request* request, const char* prompt) {
  H3_C_REQUIRE(request);
  H3_C_REQUIRE(prompt);
  return guarded(H3_ERROR_FAILED, [&] { request->request.prompt = prompt; });
}

h3_status h3_request_set_seed(h3_request* request, uint64_t seed) {
  H3_C_REQUIRE(request);
  request->request.seed = seed;
  return H3_OK;
}

h3_status h3_request_set_size(h3_request* request, int64_t width, int64_t height) {
  H3_C_REQUIRE(request);
  request->request.width = width;
  request->request.height = height;
  return H3_OK;
}

h3_status h3_request_set_frames(h3_request* request, int64_t frames) {
  H3_C_REQUIRE(request);
  request->request.frames = frames;
  request->request.seconds.reset();
  return H3_OK;
}

h3_status h3_request_set_seconds(h3_request* request, double seconds) {
  H3_C_REQUIRE(request);
  request->request.seconds = seconds;
  request->request.frames.reset();
  return H3_OK;
}

h3_status h3_request_set_steps(h3_request* request, int64_t steps) {
  H3_C_REQUIRE(request);
  request->request.steps = steps;
  return H3_OK;
}

h3_status h3_request_set_reuse(h3_request* request, int64_t reuse) {
  H3_C_REQUIRE(request);
  request->request.reuse = reuse;
  return H3_OK;
}

h3_status h3_request_set_core_reuse(h3_request* request, int64_t core_reuse) {
  H3_C_REQUIRE(request);
  request->request.core_reuse = core_reuse;
  return H3_OK;
}

h3_status h3_request_set_layers(h3_request* request, int64_t layers) {
  H3_C_REQUIRE(request);
  request->request.layers = layers == 0 ? std::nullopt : std::optional<int64_t>(layers);
  return H3_OK;
}

h3_status h3_request_set_token_reduction(h3_request* request, int on) {
  H3_C_REQUIRE(request);
  if (const h3_status s = check_switch(__func__, "on", on); s != H3_OK) return s;
  request->request.token_reduction = on == 1;
  return H3_OK;
}

h3_status h3_request_set_render_size(h3_request* request, int64_t width, int64_t height) {
  H3_C_REQUIRE(request);
  // 0 leaves a side unset: one side alone is validate_request's "go together" rule, not an argument error.
  auto side = [](int64_t v) { return v == 0 ? std::nullopt : std::optional<int64_t>(v); };
  request->request.render_width = side(width);
  request->request.render_height = side(height);
  return H3_OK;
}

h3_status h3_request_set_use_reference_rope(h3_request* request, int on) {
  H3_C_REQUIRE(request);
  if (const h3_status s = check_switch(__func__, "on", on); s != H3_OK) return s;
  request->request.use_reference_rope = on == 1;
  return H3_OK;
}

h3_status h3_request_set_keyframe(h3_request* request, h3_keyframe which, const char* path) {
  H3_C_REQUIRE(request);
  if (!is_keyframe(which)) return failure(H3_ERROR_INVALID_ARGUMENT, "h3_request_set_keyframe: which must be "
                                                                     "H3_KEYFRAME_FIRST or H3_KEYFRAME_LAST.");
  return guarded(H3_ERROR_FAILED, [&] {
    if (path)
      keyframe_slot(request, which) = h3::ImageInput::file(path);
    else
      keyframe_slot(request, which).reset();
  });
}

h3_status h3_request_set_keyframe_rgb8(h3_request* request, h3_keyframe which, const uint8_t* rgb, int width,
                                       int height) {
  H3_C_REQUIRE(request);
  H3_C_REQUIRE(rgb);
  if (!is_keyframe(which)) return failure(H3_ERROR_INVALID_ARGUMENT, "h3_request_set_keyframe_rgb8: which must be "
                                                                     "H3_KEYFRAME_FIRST or H3_KEYFRAME_LAST.");
  if (width <= 0 || height <= 0)
    return failure(H3_ERROR_INVALID_ARGUMENT, h3::cat("h3_request_set_keyframe_rgb8: the picture needs a positive "
                                                      "width and height, got ", width, "x", height, "."));
  return guarded(H3_ERROR_FAILED, [&] {
    h3::Rgb8Image image;
    image.width = width;
    image.height = height;
    image.rgb.assign(rgb, rgb + static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
    keyframe_slot(request, which) = h3::ImageInput::rgb8(std::move(image));
  });
}

h3_status h3_request_add_reference(h3_request* request, h3_reference_kind kind, const char* path,
                                   const char* soundtrack_path) {
  H3_C_REQUIRE(request);
  H3_C_REQUIRE(path);
  using K = h3::ReferenceInput::Kind;
  using S = h3::ReferenceInput::Soundtrack;
  h3::ReferenceInput r;
  switch (kind) {
    case H3_REFERENCE_IMAGE: r.kind = K::Image; break;
    case H3_REFERENCE_VIDEO: r.kind = K::Video; break;
    case H3_REFERENCE_SILENT_VIDEO:
      r.kind = K::Video;
      r.soundtrack = S::None;
      break;
    case H3_REFERENCE_VIDEO_AUDIO:
      r.kind = K::Video;
      r.soundtrack = S::Replaced;
      break;
    case H3_REFERENCE_AUDIO: r.kind = K::Audio; break;
    default:
      return failure(H3_ERROR_INVALID_ARGUMENT, h3::cat("h3_request_add_reference: ", static_cast<int>(kind),
                                                        " is not an h3_reference_kind."));
  }
  if ((kind == H3_REFERENCE_VIDEO_AUDIO) != (soundtrack_path != nullptr))
    return failure(H3_ERROR_INVALID_ARGUMENT, "h3_request_add_reference: a soundtrack path goes with "
                                              "H3_REFERENCE_VIDEO_AUDIO, and only with it.");
  return guarded(H3_ERROR_FAILED, [&] {
    r.path = path;
    if (soundtrack_path) r.soundtrack_path = soundtrack_path;
    request->request.references.push_back(std::move(r));
  });
}

h3_status h3_request_clear_references(h3_request* request) {
  H3_C_REQUIRE(request);
  request->request.references.clear();
  return H3_OK;
}

h3_status h3_request_set_reference_image_size(h3_request* request, int match) {
  H3_C_REQUIRE(request);
  if (match != 0 && match != 1)
    return failure(H3_ERROR_INVALID_ARGUMENT, h3::cat("h3_request_set_reference_image_size: match is 0 (max) or 1 "
                                                      "(match), got ", match, "."));
  request->request.reference_image_size = match ? h3::ReferenceImageSize::Match : h3::ReferenceImageSize::Max;
  return H3_OK;
}

h3_status h3_engine_validate(h3_engine* engine, const h3_request* request, int64_t* width, int64_t* height,
                             int64_t* frames) {
  H3_C_REQUIRE(engine);
  H3_C_REQUIRE(request);
  return guarded(H3_ERROR_INVALID_REQUEST, [&] {
    const h3::ResolvedRequest r = engine->engine->validate(request->request);
    if (width) *width = r.width;
    if (height) *height = r.height;
    if (frames) *frames = r.frames;
  });
}

h3_status h3_engine_generate(h3_engine* engine, const h3_request* request, const h3_callbacks* callbacks,
                             h3_result** result) {
  H3_C_REQUIRE(result);
  *result = nullptr;
  H3_C_REQUIRE(engine);
  H3_C_REQUIRE(request);
  if (const h3_status s = h3_engine_validate(engine, request, nullptr, nullptr, nullptr); s != H3_OK) return s;
  engine->cancel.store(false);
  return guarded(H3_ERROR_FAILED, [&] {
    h3::GenerateCallbacks cb;
    cb.cancel = &engine->cancel;
    if (callbacks && callbacks->on_progress)
      cb.on_progress = [callbacks](const h3::ProgressEvent& e) {
        callbacks->on_progress(callbacks->user, static_cast<h3_phase>(e.phase), e.done, e.total);
      };
    if (callbacks && callbacks->on_frames)
      cb.on_frames = [callbacks](const h3::Tensor& frames, int64_t first) {
        const h3::Rgb8Video chunk = h3::rgb8_from_tensor(frames);
        callbacks->on_frames(callbacks->user, chunk.rgb.data(), first, chunk.frames, chunk.width, chunk.height);
      };
    auto out = std::make_unique<h3_result>();
    out->result = engine->engine->generate(request->request, cb);
    // Raised while the last phase finished: the caller asked for nothing.
    if (engine->cancel.load()) throw h3::Cancelled();
    out->rgb8 = h3::rgb8_from_tensor(out->result.video);
    const h3::Tensor& audio = out->result.audio;
    const int64_t total = audio.defined() ? audio.dim(1) : 0;
    out->audio_samples = std::min<int64_t>(
        total, h3::audio_samples_for_frames(out->rgb8.frames, static_cast<int>(out->result.fps),
                                            static_cast<int>(out->result.sample_rate)));
    out->audio.resize(static_cast<size_t>(2 * out->audio_samples));
    for (int64_t c = 0; c < 2 && total > 0; ++c)
      std::copy_n(audio.ptr<float>() + c * total, out->audio_samples, out->audio.data() + c * out->audio_samples);
    *result = out.release();
  });
}

void h3_result_free(h3_result* result) { delete result; }
int h3_result_width(const h3_result* result) { return result ? result->rgb8.width : 0; }
int h3_result_height(const h3_result* result) { return result ? result->rgb8.height : 0; }
int64_t h3_result_frames(const h3_result* result) { return result ? result->rgb8.frames : 0; }
int h3_result_fps(const h3_result* result) { return result ? static_cast<int>(result->result.fps) : 0; }
uint64_t h3_result_seed(const h3_result* result) { return result ? result->result.request.request.seed : 0; }
const uint8_t* h3_result_video_rgb8(const h3_result* result) { return result ? result->rgb8.rgb.data() : nullptr; }
const float* h3_result_audio(const h3_result* result) { return result ? result->audio.data() : nullptr; }
int64_t h3_result_audio_samples(const h3_result* result) { return result ? result->audio_samples : 0; }
int h3_result_sample_rate(const h3_result* result) {
  return result ? static_cast<int>(result->result.sample_rate) : 0;
}

double h3_result_phase_seconds(const h3_result* result, h3_phase phase) {
  double seconds = 0;
  if (result)
    for (const h3::PhaseTiming& t : result->result.timings)
      if (static_cast<int>(t.phase) == phase) seconds += t.wall_seconds;
  return seconds;
}

h3_status h3_result_write_mp4(const h3_result* result, const char* path) {
  H3_C_REQUIRE(result);
  H3_C_REQUIRE(path);
  return guarded(H3_ERROR_IO, [&] { h3::write_generation_mp4(path, result->rgb8, result->result); });
}

}  // extern "C"

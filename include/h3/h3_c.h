/* libh3's C API: MiniMax-H3 text (+ pictures, clips, sounds) to a video with its soundtrack.
 *
 *   h3_engine* engine = NULL;
 *   if (h3_engine_open("MiniMax-H3", NULL, &engine) != H3_OK) { fprintf(stderr, "%s\n", h3_last_error()); ... }
 *   h3_request* request = h3_request_new();
 *   h3_request_set_prompt(request, "A red fox walks through fresh snow.");
 *   h3_request_set_seed(request, 7);
 *   h3_result* result = NULL;
 *   if (h3_engine_generate(engine, request, NULL, &result) == H3_OK) h3_result_write_mp4(result, "fox.mp4");
 *   h3_result_free(result); h3_request_free(request); h3_engine_free(engine);
 *
 * Every function that can fail returns an h3_status; on failure h3_last_error() holds the sentence(s) saying why
 * (one per violated rule, one per line), for the calling thread, until its next failing call. No C++ type or
 * exception crosses this API. An engine runs one generation at a time; h3_engine_cancel may be called from any
 * thread, or from a callback. Strings are UTF-8 and copied: the caller keeps ownership of everything it passes.
 * The library keeps components loaded and prompt encodings cached between generations of one engine. */
#ifndef H3_H3_C_H
#define H3_H3_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum h3_status {
  H3_OK = 0,
  H3_ERROR_INVALID_ARGUMENT = 1, /* a null pointer, an unknown enum value, a size that does not match its data */
  H3_ERROR_INVALID_REQUEST = 2,  /* the request breaks a rule: every violated rule, one sentence each */
  H3_ERROR_MODEL = 3,            /* the snapshot cannot be opened, or lacks what the request needs */
  H3_ERROR_CANCELLED = 4,        /* h3_engine_cancel stopped the generation; nothing was produced */
  H3_ERROR_OUT_OF_MEMORY = 5,
  H3_ERROR_IO = 6,               /* an output could not be written (nothing is left at its path) */
  H3_ERROR_FAILED = 7            /* the generation failed for another reason (the sentence says which) */
} h3_status;

/* "invalid argument", "invalid request", ... */
const char* h3_status_name(h3_status status);
/* The calling thread's last failure, "" when there was none. */
const char* h3_last_error(void);
/* libh3's version ("0.1.0"), and what `h3 --version` prints (version, commit, CUDA libraries, GPU architectures). */
const char* h3_version(void);
const char* h3_build_info(void);

typedef enum h3_phase {
  H3_PHASE_LOAD = 0,
  H3_PHASE_READ_REFERENCES = 1,
  H3_PHASE_ENCODE_PROMPT = 2,
  H3_PHASE_ENCODE_KEYFRAMES = 3,
  H3_PHASE_ENCODE_REFERENCES = 4,
  H3_PHASE_DENOISE = 5,
  H3_PHASE_DECODE_VIDEO = 6,
  H3_PHASE_DECODE_AUDIO = 7
} h3_phase;
/* "load", "prompt", "denoise", "video decode", ...; NULL for a value that is not a phase. */
const char* h3_phase_name(h3_phase phase);

/* ---- the engine ------------------------------------------------------------------------------------------------ */

typedef struct h3_engine h3_engine;

/* Finds the snapshot's components and reads their configs (no weights yet: they load on first use). `device` is
 * "cpu", "cuda" or "auto" (NULL: auto, CUDA when a GPU is usable). */
h3_status h3_engine_open(const char* model_dir, const char* device, h3_engine** engine);
void h3_engine_free(h3_engine* engine);
/* The backend and device, e.g. "cpu backend (AMD EPYC ..., 16 cores)"; valid while the engine lives. */
const char* h3_engine_description(h3_engine* engine);
/* Stops the generation running on `engine` after the current step (its h3_engine_generate returns
 * H3_ERROR_CANCELLED); nothing happens when none runs. Safe from any thread and from a callback. */
void h3_engine_cancel(h3_engine* engine);

/* ---- a request ------------------------------------------------------------------------------------------------- */

typedef struct h3_request h3_request;

/* A request with the defaults: 864x480 (fl2va: the first keyframe's canvas), 124 frames, 20 passes, seed 42. */
h3_request* h3_request_new(void);
void h3_request_free(h3_request* request);
h3_status h3_request_set_prompt(h3_request* request, const char* prompt);
h3_status h3_request_set_seed(h3_request* request, uint64_t seed);
/* Pixels; multiples of the model's canvas multiple (32 for the release), at most 768x1344 in all. */
h3_status h3_request_set_size(h3_request* request, int64_t width, int64_t height);
/* Frames at 24 fps (1..362, rounded up to 17n + 5), or a duration in seconds instead: the last one set counts. */
h3_status h3_request_set_frames(h3_request* request, int64_t frames);
h3_status h3_request_set_seconds(h3_request* request, double seconds);
/* Denoising passes (model evaluations), 2..1000. */
h3_status h3_request_set_steps(h3_request* request, int64_t steps);

/* The speed controls (h3.c's, off by default: the defaults are the exact path; README "Speed controls" says what
 * each does). The setters store what they are given; h3_engine_validate and h3_engine_generate check it with every
 * other rule (H3_ERROR_INVALID_REQUEST, the rule's sentence, as `h3 --reuse` and the others give it).
 *   reuse        evaluate the first, the last and every reuse-th pass, extrapolate the others: 1..3 (default 1)
 *   core_reuse   the transformer core's refresh interval: 1..6 (default 1), not together with reuse > 1
 *   layers       transformer blocks to run: seven tenths of the model's (rounded up) to all; 0 = all (the default)
 *   token_reduction        0 or 1 (default 0): pair adjacent video tokens inside the middle blocks
 *   render size  the canvas the model and the VAEs run on, the frames then upscaled to the output size: both
 *                multiples of 32, the output's aspect ratio, at most its size; 0, 0 = the output canvas (default)
 *   use_reference_rope     0 or 1 (default 0): keep the released spatial RoPE on a 256x256 canvas too */
h3_status h3_request_set_reuse(h3_request* request, int64_t reuse);
h3_status h3_request_set_core_reuse(h3_request* request, int64_t core_reuse);
h3_status h3_request_set_layers(h3_request* request, int64_t layers);
h3_status h3_request_set_token_reduction(h3_request* request, int on);
h3_status h3_request_set_render_size(h3_request* request, int64_t width, int64_t height);
h3_status h3_request_set_use_reference_rope(h3_request* request, int on);

typedef enum h3_keyframe { H3_KEYFRAME_FIRST = 0, H3_KEYFRAME_LAST = 1 } h3_keyframe;
/* A keyframe (the fl2va workflow) from an image file (NULL removes it), or from RGB24 pixels in memory (row-major,
 * interleaved, no padding: width * height * 3 bytes, copied). */
h3_status h3_request_set_keyframe(h3_request* request, h3_keyframe which, const char* path);
h3_status h3_request_set_keyframe_rgb8(h3_request* request, h3_keyframe which, const uint8_t* rgb, int width,
                                       int height);

typedef enum h3_reference_kind {
  H3_REFERENCE_IMAGE = 0,        /* a picture: <Picture N> in the prompt */
  H3_REFERENCE_VIDEO = 1,        /* a clip with its soundtrack: <Video N> (and <Audio N>) */
  H3_REFERENCE_SILENT_VIDEO = 2, /* a clip without its soundtrack */
  H3_REFERENCE_VIDEO_AUDIO = 3,  /* a clip whose soundtrack is replaced by `soundtrack_path` */
  H3_REFERENCE_AUDIO = 4         /* a sound: <Audio N> */
} h3_reference_kind;
/* Appends a reference file (the ref2va workflow; the order is the prompt's numbering). `soundtrack_path` is for
 * H3_REFERENCE_VIDEO_AUDIO only (NULL otherwise). */
h3_status h3_request_add_reference(h3_request* request, h3_reference_kind kind, const char* path,
                                   const char* soundtrack_path);
/* Removes every reference. */
h3_status h3_request_clear_references(h3_request* request);
/* How reference pictures are sized: 0 = max (the reference's, the default), 1 = match (down only, area-capped). */
h3_status h3_request_set_reference_image_size(h3_request* request, int match);

/* Checks every rule against the model before any weight loads (H3_ERROR_INVALID_REQUEST with every violated rule)
 * and gives the canvas and the frame count the request generates; any of the outputs may be NULL. */
h3_status h3_engine_validate(h3_engine* engine, const h3_request* request, int64_t* width, int64_t* height,
                             int64_t* frames);

/* ---- generating ------------------------------------------------------------------------------------------------ */

/* Progress: every phase begins with done = 0 and its total (passes for denoise, frames for the video decode, else
 * 1). Frames: decoded frames as they are ready, `count` RGB24 pictures from frame `first_frame` on (the bytes the
 * result holds), valid during the call only. */
typedef void (*h3_progress_callback)(void* user, h3_phase phase, int64_t done, int64_t total);
typedef void (*h3_frames_callback)(void* user, const uint8_t* rgb, int64_t first_frame, int64_t count, int width,
                                   int height);
typedef struct h3_callbacks {
  h3_progress_callback on_progress; /* may be NULL */
  h3_frames_callback on_frames;     /* may be NULL */
  void* user;                       /* passed to both */
} h3_callbacks;

typedef struct h3_result h3_result;

/* Validates, then generates (loading what is not loaded yet). `callbacks` may be NULL. On success *result holds
 * the video and its soundtrack (free it with h3_result_free); on failure *result is NULL. */
h3_status h3_engine_generate(h3_engine* engine, const h3_request* request, const h3_callbacks* callbacks,
                             h3_result** result);

void h3_result_free(h3_result* result);
int h3_result_width(const h3_result* result);
int h3_result_height(const h3_result* result);
int64_t h3_result_frames(const h3_result* result);
int h3_result_fps(const h3_result* result);
uint64_t h3_result_seed(const h3_result* result);
/* frames * height * width * 3 bytes: RGB24, frame after frame, row-major, no padding. */
const uint8_t* h3_result_video_rgb8(const h3_result* result);
/* The soundtrack cut to the video's length: h3_result_audio_samples samples per channel, stereo, planar float32 in
 * [-1, 1] (the left channel's samples, then the right's), at h3_result_sample_rate samples per second. */
const float* h3_result_audio(const h3_result* result);
int64_t h3_result_audio_samples(const h3_result* result);
int h3_result_sample_rate(const h3_result* result);
/* Wall seconds the generation spent in `phase` (0 when the phase did not run). */
double h3_result_phase_seconds(const h3_result* result, h3_phase phase);
/* The MP4 (H.264 + AAC, the settings in its metadata), written whole or not at all. */
h3_status h3_result_write_mp4(const h3_result* result, const char* path);

#ifdef __cplusplus
}
#endif

#endif /* H3_H3_C_H */

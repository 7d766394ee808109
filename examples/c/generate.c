/* libh3 from C: one video from a prompt, with progress on stderr.
 *   h3_c_example MODEL_DIR OUTPUT.mp4 PROMPT [WIDTH HEIGHT FRAMES STEPS [SEED]]
 * Build: cc generate.c $(pkg-config --cflags --libs h3)   or, with CMake, link h3::h3 (examples/CMakeLists.txt). */
#include <h3/h3_c.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

struct progress {
  int64_t frames_seen;
};

static void on_progress(void* user, h3_phase phase, int64_t done, int64_t total) {
  (void)user;
  fprintf(stderr, "%s %" PRId64 "/%" PRId64 "\n", h3_phase_name(phase), done, total);
}

static void on_frames(void* user, const uint8_t* rgb, int64_t first_frame, int64_t count, int width, int height) {
  (void)rgb;
  (void)first_frame;
  (void)width;
  (void)height;
  ((struct progress*)user)->frames_seen += count;
}

static int fail(const char* what, h3_status status) {
  fprintf(stderr, "%s: %s: %s\n", what, h3_status_name(status), h3_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4 && argc != 8 && argc != 9) {
    fprintf(stderr, "usage: %s MODEL_DIR OUTPUT.mp4 PROMPT [WIDTH HEIGHT FRAMES STEPS [SEED]]\n", argv[0]);
    return 2;
  }
  printf("libh3 %s\n", h3_version());
  h3_engine* engine = NULL;
  h3_status status = h3_engine_open(argv[1], NULL, &engine);
  if (status != H3_OK) return fail("h3_engine_open", status);
  printf("%s\n", h3_engine_description(engine));

  h3_request* request = h3_request_new();
  h3_request_set_prompt(request, argv[3]);
  if (argc >= 8) {
    h3_request_set_size(request, atoll(argv[4]), atoll(argv[5]));
    h3_request_set_frames(request, atoll(argv[6]));
    h3_request_set_steps(request, atoll(argv[7]));
  }
  if (argc == 9) h3_request_set_seed(request, strtoull(argv[8], NULL, 10));

  int64_t width = 0, height = 0, frames = 0;
  status = h3_engine_validate(engine, request, &width, &height, &frames);
  if (status != H3_OK) return fail("h3_engine_validate", status);
  printf("generating %" PRId64 "x%" PRId64 ", %" PRId64 " frames\n", width, height, frames);

  struct progress seen = {0};
  const h3_callbacks callbacks = {on_progress, on_frames, &seen};
  h3_result* result = NULL;
  status = h3_engine_generate(engine, request, &callbacks, &result);
  if (status != H3_OK) return fail("h3_engine_generate", status);
  status = h3_result_write_mp4(result, argv[2]);
  if (status != H3_OK) return fail("h3_result_write_mp4", status);
  printf("wrote %s: %dx%d, %" PRId64 " frames (%" PRId64 " seen as they were decoded), %" PRId64
         " audio samples at %d Hz, seed %" PRIu64 ", denoise %.2f s\n",
         argv[2], h3_result_width(result), h3_result_height(result), h3_result_frames(result), seen.frames_seen,
         h3_result_audio_samples(result), h3_result_sample_rate(result), h3_result_seed(result),
         h3_result_phase_seconds(result, H3_PHASE_DENOISE));

  h3_result_free(result);
  h3_request_free(request);
  h3_engine_free(engine);
  return 0;
}

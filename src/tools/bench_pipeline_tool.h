// `h3 tool bench-pipeline` (also the `bench_pipeline` binary): the whole t2va pipeline at the released sizes with
// random weights made directly on the device (no checkpoint), every component resident at once:
//
//  1. isolated timings the acceptance names: the conditioner (50 layers) on a 300-token prompt (median of
//     --reps-conditioner after warm-up), the audio VAE decode of 207 latents × 2 channels (median of --reps-audio),
//     the video VAE decode of each shape's latents (median of --reps-video);
//  2. one generation per shape (--shapes, default 864x480x124,1344x768x124) with --passes model passes: per-phase
//     wall and device time (conditioner, denoise and its per-pass time, video decode, audio decode) and the peak
//     device memory with everything resident.
//  3. with --fl2va (the fl2va workflow's acceptance; the vision tower and the video VAE encoder made resident too), on
//     the first shape's canvas: the conditioning encode of one random keyframe (JSON `keyframe_encode`, median of
//     --reps-keyframe after a warm-up), the vision tower on that keyframe's processor rows (`vision_tower`, median of
//     --reps-vision after two warm-ups), and three generations — t2va, fl2va with two random keyframes (one at the
//     canvas size, one of half its width) and t2va with a prompt padded so that its packed length equals fl2va's —
//     each measured after a warm-up generation of the same request: time per pass (the Denoise phase's device time /
//     passes), packed lengths and the rows fl2va adds (`fl2va_generation`). Device times come from the backend's
//     timing marks. Combine with --skip-isolated --skip-generation to run only these.
//  4. with --speed-controls (issue 16), per shape (default 864x480x124 and 512x512x22): the exact path's denoise,
//     then that of each --speed-configs setting ("NAME=JSON;...", JSON objects of the request file's keys, e.g.
//     reuse2={"reuse":2}; default: each of the pipeline's controls alone), every generation stopped after its denoise
//     (no decode): denoise device time and its ratio to the exact path's, evaluated passes, peak and resident device
//     memory, the final latents' relative L2 to the exact path's (`speed_controls`). A setting a shape does not
//     allow (e.g. a render canvas of another aspect) is reported as skipped, with the rule's sentence.
//
// Self-checking: every output must be finite and not constant (a failed check is exit status 1). Results are
// printed as text and as one `JSON {...}` line per measurement, also appended to $OUT/bench_pipeline.jsonl when OUT
// is set. --tiny runs tiny configurations instead (a smoke test of the harness that runs on the CPU too).
#pragma once

namespace h3 {

// argv[0] is the tool's name. Returns the exit status (0 ok, 1 failed check or error, 2 usage).
int tool_bench_pipeline(int argc, char** argv);

}  // namespace h3

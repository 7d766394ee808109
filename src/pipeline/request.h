// One generation request and its validation: the public types and rules are include/h3/request.h; this header adds
// what the engine and the CLI share internally.
#pragma once
#include <vector>

#include "h3/request.h"
#include "io/snapshot.h"
#include "media/audio_input.h"
#include "media/video_frames.h"
#include "media/video_input.h"
#include "util/overwrite_check.h"

namespace h3 {

// The rule that keeps the two conditioned workflows apart (spec/layout.md §4: what a request carries decides its
// workflow), as request_problems states it.
inline constexpr const char* kKeyframesWithReferencesRule =
    "Keyframes (--first-frame, --last-frame) and references (--ref-*) cannot be combined: keyframes select the "
    "fl2va workflow, references ref2va.";

// The files `r` reads, named by the flags that give them: its keyframes (--first-frame, --last-frame) and its
// references (--ref-image, --ref-video, --ref-silent-video, --ref-audio; both files of --ref-video-audio). In-memory
// media reads no file.
std::vector<NamedPath> request_input_files(const GenerationRequest& r);
// The rules of a render canvas (--render-width/--render-height) against the output canvas `width` × `height`:
// both sides or neither, multiples of `canvas_multiple`, no side larger than the output's, the same aspect ratio.
std::vector<std::string> render_canvas_problems(const GenerationRequest& r, int64_t width, int64_t height,
                                                int64_t canvas_multiple);
// Throws h3::Error with every problem, one per line (validate_request's form), when there is any.
void throw_if_problems(const std::vector<std::string>& problems);
// h3.c's warning for reuse > 1 with fewer than 8 passes (one sentence), empty otherwise.
std::string few_passes_reuse_warning(const ResolvedRequest& r);

}  // namespace h3

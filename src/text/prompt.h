// Prompt presentations (spec/conditioner.md §3): the token sequence the conditioner encodes for one request, with a
// modality tag per token. Each text segment is tokenized on its own (add_special_tokens = false: nothing added before
// or after) and the id lists are concatenated — segments are never joined as strings first. There is no chat
// template, system prompt, BOS or EOS.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/qwen3vl/vision_grid.h"
#include "text/tokenizer.h"

namespace h3 {

// MiniMax-H3's modality tags of conditioner rows (`text_token_tags`): 1 for text rows, 0 for every row of a vision
// block (start, pads, end).
constexpr int64_t kTextTokenTag = 1;
constexpr int64_t kVisionTokenTag = 0;

struct Presentation {
  std::vector<int32_t> ids;
  std::vector<int64_t> tags;  // one per id

  // Appends one text segment, tokenized on its own, tagged text.
  void append_text(const Tokenizer& tokenizer, std::string_view text);
  // Appends one vision block (§3.1): <|vision_start|>, `pads` × the pad token `pad`, <|vision_end|>, all tagged
  // vision. The ids come from the tokenizer's added tokens (throws if it lacks one).
  void append_vision(const Tokenizer& tokenizer, std::string_view pad, int64_t pads);
};

// The rules every workflow applies to the user prompt (§3.1), checked in this order, each broken one thrown as one
// sentence: it must not be empty (it would give zero prompt tokens); it must be valid UTF-8 (utf8::require_valid);
// and it must not write out any of the tokenizer's added tokens — "<|image_pad|>", "<|video_pad|>",
// "<|vision_start|>", "<|vision_end|>", "<|im_start|>", "<|endoftext|>", "<think>", ... (Qwen's 26) — which the
// tokenizer turns into their single control ids, not into text (the pads would also break the vision blocks'
// bookkeeping). The reference accepts such prompts and encodes the control ids; h3 refuses them.
void check_prompt(const Tokenizer& tokenizer, std::string_view prompt);

// t2va (§3.2): the prompt alone, all tags text. Checks the prompt first.
Presentation present_t2va(const Tokenizer& tokenizer, std::string_view prompt);

// fl2va (§3.3, packing.md §3): for keyframe k = 1, 2, ... in packed order (the first frame's, then the last
// frame's), "<Picture k>: " then a vision block of grids[k−1].tokens(merge_size) <|image_pad|> tokens; then the
// prompt. `grids` are the keyframes' image_grid_thw (prepare_images). Checks the prompt first; throws for no
// keyframe or more than two.
Presentation present_fl2va(const Tokenizer& tokenizer, std::string_view prompt, const std::vector<ImageGrid>& grids,
                           int64_t merge_size);

// One reference of a ref2va request as its presentation sees it (§3.4).
struct Ref2vaReference {
  enum class Kind { Image, Video, Audio };
  Kind kind = Kind::Image;
  // Whether it carries sound: a video with its soundtrack (an audio reference always does; an image never).
  bool has_audio = false;
  // Image: its image_grid_thw; video: its video_grid_thw (t temporal blocks of (h / merge)·(w / merge) tokens).
  ImageGrid grid;
  // Video: each block's timestamp in seconds (sample_video_condition_frames), grid.t of them.
  std::vector<double> block_timestamps;
};

// A block's timestamp label, "<" + the seconds as Python's f"{seconds:.1f}" writes them + " seconds>": the binary
// value's decimal expansion rounded to one digit, ties to even (0.25 gives "<0.2 seconds>").
std::string timestamp_label(double seconds);

// ref2va (§3.4, packing.md §3; encoders.py `MiniMaxH3Ref2VATextEncoderStep._build_presentation`): the references in
// request order, counted per modality from 1 — "<Audio j>: " for each one that carries sound (a video's before its
// own label), "<Picture i>: " and a block of grid.tokens(merge_size) <|image_pad|> for an image, "<Video k>: " and
// for each temporal block its timestamp_label and a block of (h / merge)·(w / merge) <|video_pad|> for a video —
// then the prompt. Checks the prompt first; throws for no reference, an image with sound, or a video whose grid and
// timestamps disagree.
Presentation present_ref2va(const Tokenizer& tokenizer, std::string_view prompt,
                            const std::vector<Ref2vaReference>& references, int64_t merge_size);

}  // namespace h3

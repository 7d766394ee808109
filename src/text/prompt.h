// Prompt presentations (spec/conditioner.md §3): the token sequence the conditioner encodes for one request, with a
// modality tag per token. Each text segment is tokenized on its own (add_special_tokens = false: nothing added before
// or after) and the id lists are concatenated — segments are never joined as strings first. There is no chat
// template, system prompt, BOS or EOS.
#pragma once
#include <cstdint>
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

// The rules every workflow applies to the user prompt (§3.1): it must not be empty (it would give zero prompt
// tokens) and must not contain "<|image_pad|>" or "<|video_pad|>" (the tokenizer turns them into the pad tokens,
// which would break the vision blocks' bookkeeping). Throws one sentence per rule.
void check_prompt(std::string_view prompt);

// t2va (§3.2): the prompt alone, all tags text. Checks the prompt first; invalid UTF-8 is rejected by the tokenizer.
Presentation present_t2va(const Tokenizer& tokenizer, std::string_view prompt);

// fl2va (§3.3, packing.md §3): for keyframe k = 1, 2, ... in packed order (the first frame's, then the last
// frame's), "<Picture k>: " then a vision block of grids[k−1].tokens(merge_size) <|image_pad|> tokens; then the
// prompt. `grids` are the keyframes' image_grid_thw (prepare_images). Checks the prompt first; throws for no
// keyframe or more than two.
Presentation present_fl2va(const Tokenizer& tokenizer, std::string_view prompt, const std::vector<ImageGrid>& grids,
                           int64_t merge_size);

}  // namespace h3

// Prompt presentations (spec/conditioner.md §3): the token sequence the conditioner encodes for one request, with a
// modality tag per token. Each text segment is tokenized on its own (add_special_tokens = false: nothing added before
// or after) and the id lists are concatenated — segments are never joined as strings first. There is no chat
// template, system prompt, BOS or EOS.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

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
};

// The rules every workflow applies to the user prompt (§3.1): it must not be empty (it would give zero prompt
// tokens) and must not contain "<|image_pad|>" or "<|video_pad|>" (the tokenizer turns them into the pad tokens,
// which would break the vision blocks' bookkeeping). Throws one sentence per rule.
void check_prompt(std::string_view prompt);

// t2va (§3.2): the prompt alone, all tags text. Checks the prompt first; invalid UTF-8 is rejected by the tokenizer.
Presentation present_t2va(const Tokenizer& tokenizer, std::string_view prompt);

}  // namespace h3

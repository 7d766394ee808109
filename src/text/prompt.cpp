#include "text/prompt.h"

#include "util/error.h"

namespace h3 {

void Presentation::append_text(const Tokenizer& tokenizer, std::string_view text) {
  const std::vector<int32_t> segment = tokenizer.encode(text);
  ids.insert(ids.end(), segment.begin(), segment.end());
  tags.insert(tags.end(), segment.size(), kTextTokenTag);
}

void check_prompt(std::string_view prompt) {
  H3_CHECK(!prompt.empty(), "the prompt is empty; MiniMax-H3 needs a prompt of at least one character");
  for (std::string_view pad : {"<|image_pad|>", "<|video_pad|>"})
    H3_CHECK(prompt.find(pad) == std::string_view::npos, "the prompt contains '", pad,
             "', a token reserved for the vision blocks of a presentation; remove it from the prompt");
}

Presentation present_t2va(const Tokenizer& tokenizer, std::string_view prompt) {
  check_prompt(prompt);
  Presentation p;
  p.append_text(tokenizer, prompt);
  return p;
}

}  // namespace h3

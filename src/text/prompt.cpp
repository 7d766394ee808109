#include "text/prompt.h"

#include <optional>

#include "util/error.h"

namespace h3 {

void Presentation::append_text(const Tokenizer& tokenizer, std::string_view text) {
  const std::vector<int32_t> segment = tokenizer.encode(text);
  ids.insert(ids.end(), segment.begin(), segment.end());
  tags.insert(tags.end(), segment.size(), kTextTokenTag);
}

void Presentation::append_vision(const Tokenizer& tokenizer, std::string_view pad, int64_t pads) {
  auto id = [&](std::string_view token) {
    const std::optional<int32_t> found = tokenizer.token_id(token);
    H3_CHECK(found.has_value(), "the tokenizer has no '", token, "' token, which a vision block needs");
    return *found;
  };
  H3_CHECK(pads > 0, "a vision block needs at least one pad token, got ", pads);
  const int32_t start = id("<|vision_start|>"), pad_id = id(pad), end = id("<|vision_end|>");
  ids.push_back(start);
  ids.insert(ids.end(), static_cast<size_t>(pads), pad_id);
  ids.push_back(end);
  tags.insert(tags.end(), static_cast<size_t>(pads) + 2, kVisionTokenTag);
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

Presentation present_fl2va(const Tokenizer& tokenizer, std::string_view prompt, const std::vector<ImageGrid>& grids,
                           int64_t merge_size) {
  check_prompt(prompt);
  H3_CHECK(grids.size() == 1 || grids.size() == 2, "fl2va shows the conditioner one or two keyframes, got ",
           grids.size());
  Presentation p;
  for (size_t k = 0; k < grids.size(); ++k) {
    p.append_text(tokenizer, cat("<Picture ", k + 1, ">: "));
    p.append_vision(tokenizer, "<|image_pad|>", grids[k].tokens(merge_size));
  }
  p.append_text(tokenizer, prompt);
  return p;
}

}  // namespace h3

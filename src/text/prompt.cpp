#include "text/prompt.h"

#include <charconv>
#include <cmath>
#include <optional>

#include "text/utf8.h"
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

void check_prompt(const Tokenizer& tokenizer, std::string_view prompt) {
  H3_CHECK(!prompt.empty(), "the prompt is empty; MiniMax-H3 needs a prompt of at least one character");
  utf8::require_valid(prompt);
  // The tokenizer matches an added token in the raw text, or in its NFC form when the token is `normalized`.
  std::optional<std::string> composed;
  const Tokenizer::AddedToken* first = nullptr;
  size_t first_at = std::string_view::npos;
  for (const Tokenizer::AddedToken& t : tokenizer.added_tokens()) {
    if (t.normalized && !composed) composed = utf8::nfc(prompt);
    const size_t at = std::string_view(t.normalized ? *composed : prompt).find(t.content);
    if (at < first_at) {
      first = &t;
      first_at = at;
    }
  }
  if (first)
    fail("the prompt contains '", first->content, "', one of the tokenizer's control tokens, which it would read as "
         "that token and not as text; remove it from the prompt");
}

Presentation present_t2va(const Tokenizer& tokenizer, std::string_view prompt) {
  check_prompt(tokenizer, prompt);
  Presentation p;
  p.append_text(tokenizer, prompt);
  return p;
}

Presentation present_fl2va(const Tokenizer& tokenizer, std::string_view prompt, const std::vector<ImageGrid>& grids,
                           int64_t merge_size) {
  check_prompt(tokenizer, prompt);
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

std::string timestamp_label(double seconds) {
  H3_CHECK(std::isfinite(seconds), "a timestamp must be a finite number of seconds, got ", seconds);
  // std::to_chars with a precision writes the correctly rounded decimal, as Python's float formatting does.
  char digits[400];
  const std::to_chars_result r =
      std::to_chars(digits, digits + sizeof digits, seconds, std::chars_format::fixed, 1);
  H3_CHECK(r.ec == std::errc(), "timestamp ", seconds, " does not fit its label");
  return cat("<", std::string_view(digits, static_cast<size_t>(r.ptr - digits)), " seconds>");
}

Presentation present_ref2va(const Tokenizer& tokenizer, std::string_view prompt,
                            const std::vector<Ref2vaReference>& references, int64_t merge_size) {
  check_prompt(tokenizer, prompt);
  H3_CHECK(!references.empty(), "ref2va shows the conditioner at least one reference, got none");
  H3_CHECK(merge_size > 0, "the spatial merge size must be positive, got ", merge_size);
  using Kind = Ref2vaReference::Kind;
  for (size_t r = 0; r < references.size(); ++r) {
    const Ref2vaReference& ref = references[r];
    H3_CHECK(ref.kind != Kind::Image || !ref.has_audio, "reference ", r + 1, " is an image and cannot carry audio");
    if (ref.kind == Kind::Audio) continue;
    const ImageGrid& g = ref.grid;
    H3_CHECK(g.t >= 1 && g.h > 0 && g.w > 0 && g.h % merge_size == 0 && g.w % merge_size == 0, "reference ", r + 1,
             " has grid (", g.t, ", ", g.h, ", ", g.w, "); its sides must be positive multiples of the merge size ",
             merge_size);
    H3_CHECK(ref.kind != Kind::Image || g.t == 1, "reference ", r + 1, " is an image of grid (", g.t, ", ", g.h, ", ",
             g.w, "); an image grid has t = 1");
    H3_CHECK(ref.kind != Kind::Video || static_cast<int64_t>(ref.block_timestamps.size()) == g.t,
             "The processor merged reference ", r + 1, " (a video) into ", g.t,
             " vision blocks, but MiniMax-H3 labels ", ref.block_timestamps.size(), " of them.");
  }
  Presentation p;
  int64_t pictures = 0, videos = 0, audios = 0;
  for (const Ref2vaReference& ref : references) {
    if (ref.kind == Kind::Audio || ref.has_audio) p.append_text(tokenizer, cat("<Audio ", ++audios, ">: "));
    if (ref.kind == Kind::Image) {
      p.append_text(tokenizer, cat("<Picture ", ++pictures, ">: "));
      p.append_vision(tokenizer, "<|image_pad|>", ref.grid.tokens(merge_size));
    } else if (ref.kind == Kind::Video) {
      p.append_text(tokenizer, cat("<Video ", ++videos, ">: "));
      const int64_t block_tokens = (ref.grid.h / merge_size) * (ref.grid.w / merge_size);
      for (double seconds : ref.block_timestamps) {
        p.append_text(tokenizer, timestamp_label(seconds));
        p.append_vision(tokenizer, "<|video_pad|>", block_tokens);
      }
    }
  }
  p.append_text(tokenizer, prompt);
  return p;
}

}  // namespace h3

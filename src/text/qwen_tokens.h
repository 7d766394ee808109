// Constants of the Qwen2/Qwen3(-VL) tokenizer family that MiniMax-H3 uses (tokenizer.md §1, §3, §6).
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

namespace h3::qwen {

// The pre-tokenizer split regex (Oniguruma syntax), exactly as stored in Qwen's tokenizer.json.
inline constexpr std::string_view kSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct AddedTokenSpec {
  std::string_view content;
  bool special;
};

// Qwen's 26 added tokens in id order; in the Qwen3 vocabulary they are ids 151643..151668.
inline constexpr int32_t kFirstAddedTokenId = 151643;
inline constexpr std::array<AddedTokenSpec, 26> kAddedTokens = {{
    {"<|endoftext|>", true},      {"<|im_start|>", true},       {"<|im_end|>", true},
    {"<|object_ref_start|>", true}, {"<|object_ref_end|>", true}, {"<|box_start|>", true},
    {"<|box_end|>", true},        {"<|quad_start|>", true},     {"<|quad_end|>", true},
    {"<|vision_start|>", true},   {"<|vision_end|>", true},     {"<|vision_pad|>", true},
    {"<|image_pad|>", true},      {"<|video_pad|>", true},      {"<tool_call>", false},
    {"</tool_call>", false},      {"<|fim_prefix|>", false},    {"<|fim_middle|>", false},
    {"<|fim_suffix|>", false},    {"<|fim_pad|>", false},       {"<|repo_name|>", false},
    {"<|file_sep|>", false},      {"<tool_response>", false},   {"</tool_response>", false},
    {"<think>", false},           {"</think>", false},
}};

}  // namespace h3::qwen

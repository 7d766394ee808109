// A tiny byte-level BPE tokenizer of the same kind as Qwen's, for the tiny demo model and for tests: NFC,
// Qwen's split regex, ByteLevel, the 256 byte symbols as ids 0..255 (GPT-2 order), merges learned
// deterministically by a small BPE trainer over a built-in English text, then Qwen's 26 added tokens.
#pragma once
#include <string>

namespace h3 {

// The tokenizer.json text (identical on every call and every machine).
std::string make_tiny_tokenizer_json();
// The matching tokenizer_config.json (Qwen2TokenizerFast, no bos, eos <|im_end|>, pad <|endoftext|>).
std::string make_tiny_tokenizer_config_json();

}  // namespace h3

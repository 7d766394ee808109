// `h3 tool encode-text --text-encoder DIR --tokenizer PATH --prompt TEXT --out OUT.safetensors
//                      [--device cpu|cuda|auto]`
// Encodes a t2va prompt as MiniMax-H3's conditioner does (spec/conditioner.md §3.2, §7) and writes `input_ids`
// (Nt, I64) and `prompt_embeds` (1, Nt, hidden, F32: the hidden state after decoder layer 50) to OUT, atomically.
#pragma once
#include <iosfwd>

namespace h3 {

// argv[0] is the tool's own name and is skipped; the options follow. Returns the exit status: 0 on success,
// 1 when encoding fails (bad prompt, missing or broken model files, ...), 2 for bad usage; one line on stderr
// either way, and OUT is not written on any failure.
int tool_encode_text(int argc, char** argv);
// The same with explicit streams (for tests).
int tool_encode_text(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace h3

// --precision (issue 18): the word's values and the one place that decides whether a backend runs it.
#pragma once
#include <optional>
#include <string>

#include "backend/backend.h"
#include "models/dit/dit.h"

namespace h3 {

// The values --precision, !precision and EngineOptions::precision take, in help order.
inline constexpr const char* kPrecisionValues[] = {"bf16", "fp8"};

// nullopt when `word` is one of kPrecisionValues, else the sentence (without its full stop) that refuses it.
std::optional<std::string> check_precision_word(const std::string& what, const std::string& word);

// The transformer's precision for `word` on `be`: throws h3::Error with one sentence when the word is unknown or
// the backend cannot run FP8 (the CPU backend, a GPU below compute capability 8.9). fp8 reads
// H3_FP8_WEIGHT_SCALING=channel|block (default channel); H3_DISABLE_FP8=1 runs bf16 instead (the exact twin). fp8
// also runs the main blocks' attention in FP8 where the backend has it (Hopper), else says in the log that it stays
// bf16; H3_DISABLE_FP8_ATTENTION=1 keeps it bf16 (the exact twin of that part: FP8 linears, bf16 attention).
DitPrecision resolve_dit_precision(const std::string& word, const Backend& be);

}  // namespace h3

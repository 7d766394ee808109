#include "pipeline/precision.h"

#include "util/env.h"
#include "util/error.h"
#include "util/log.h"

namespace h3 {

std::optional<std::string> check_precision_word(const std::string& what, const std::string& word) {
  for (const char* v : kPrecisionValues)
    if (word == v) return std::nullopt;
  return cat(what, " must be bf16 or fp8, got '", word.substr(0, 80), "'");
}

DitPrecision resolve_dit_precision(const std::string& word, const Backend& be) {
  if (const auto problem = check_precision_word("--precision", word)) throw Error(*problem + ".");
  DitPrecision p;
  if (word != "fp8") return p;
  if (env_flag("H3_DISABLE_FP8")) {
    log_info("--precision fp8: H3_DISABLE_FP8 is set, the transformer runs in bf16");
    return p;
  }
  const std::string reason = be.fp8_unsupported_reason();
  if (!reason.empty()) throw Error(reason + ".");
  p.fp8 = true;
  p.fp8_scaling = env_word("H3_FP8_WEIGHT_SCALING", "channel", {"channel", "block"}) == "block" ? Fp8Scaling::Block
                                                                                              : Fp8Scaling::Channel;
  if (env_flag("H3_DISABLE_FP8_ATTENTION")) {
    log_info("--precision fp8: H3_DISABLE_FP8_ATTENTION is set, the transformer's attention runs in bf16");
  } else if (const std::string why = be.fp8_attention_unsupported_reason(); !why.empty()) {
    log_info("--precision fp8: the transformer's attention runs in bf16 (", why, ")");
  } else {
    p.fp8_attention = true;
  }
  return p;
}

}  // namespace h3

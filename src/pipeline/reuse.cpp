#include "pipeline/reuse.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "util/error.h"

// The extrapolation rounds once per written operation (as h3.c's C expression reads, without contraction).
#include "util/strict_fp.h"

namespace h3 {

std::vector<bool> reuse_schedule(int64_t passes, int64_t interval) {
  H3_CHECK(passes >= 1 && interval >= 1, "a reuse schedule needs at least one pass and an interval of at least 1, got ",
           passes, " passes and interval ", interval);
  std::vector<bool> out(static_cast<size_t>(passes));
  for (int64_t p = 0; p < passes; ++p) out[p] = interval == 1 || p == 0 || p == passes - 1 || p % interval == 0;
  return out;
}

std::vector<bool> parse_reuse_passes(const std::string& text, int64_t passes) {
  const std::string rule = cat("H3_REUSE_STEPS must list the passes to evaluate as strictly increasing whole numbers "
                               "from 0 to ", passes - 1, ", separated by commas, including 0 and ", passes - 1,
                               "; got '", text, "'.");
  std::vector<bool> out(static_cast<size_t>(passes));
  int64_t previous = -1;
  for (size_t at = 0;;) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    errno = 0;
    const long long p = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE ||
        *end != '\0' || p <= previous || p >= passes)
      throw Error(rule);
    out[p] = true;
    previous = p;
    if (comma == text.size()) break;
    at = comma + 1;
  }
  if (!out.front() || !out.back()) throw Error(rule);
  return out;
}

std::vector<bool> evaluated_passes(int64_t passes, int64_t interval) {
  const char* custom = interval > 1 ? std::getenv("H3_REUSE_STEPS") : nullptr;
  if (custom && *custom) return parse_reuse_passes(custom, passes);
  return reuse_schedule(passes, interval);
}

int64_t count_evaluated(const std::vector<bool>& evaluated) {
  return std::count(evaluated.begin(), evaluated.end(), true);
}

float reuse_extrapolation_ratio(float sigma, float sigma_last, float sigma_previous) {
  const float denominator = sigma_last - sigma_previous;
  if (denominator == 0.0f) return 0.0f;
  const float step = sigma - sigma_last;
  const float ratio = step / denominator;
  return std::clamp(ratio, -2.0f, 2.0f);
}

void extrapolate_velocity(const float* last, const float* previous, float ratio, float* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const float slope = last[k] - previous[k];
    const float change = ratio * slope;
    out[k] = last[k] + change;
  }
}

}  // namespace h3

// Settings read from the environment (the H3_* variables that select exact twins, tuning and measurement): one
// place that parses them, so that a bad value gets one sentence naming the variable and its valid values.
#pragma once
#include <initializer_list>
#include <string>

namespace h3 {

// True when `name` is set, non-empty and not "0".
bool env_flag(const char* name);

// The integer in `name`, or `fallback` when it is unset or empty; throws h3::Error when the value is not an integer
// in [lo, hi].
int env_int(const char* name, int fallback, int lo, int hi);

// The integer in `name` when it is one of `allowed`, or `fallback` when unset or empty; throws h3::Error naming the
// allowed values otherwise.
int env_choice(const char* name, int fallback, std::initializer_list<int> allowed);

// The word in `name` when it is one of `allowed`, or `fallback` when unset or empty; throws h3::Error naming the
// allowed words otherwise.
std::string env_word(const char* name, const char* fallback, std::initializer_list<const char*> allowed);

}  // namespace h3

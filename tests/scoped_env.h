// Test helper: sets an environment variable for one scope (the H3_* switches are read when a backend or tokenizer is
// made) and unsets it at the end of the scope.
#pragma once
#include <cstdlib>
#include <string>

namespace h3 {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
};

}  // namespace h3

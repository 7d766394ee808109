// Sets an environment variable for one scope and restores what was there before (its old value, or unset) when
// the scope ends — for the tests and benchmarks that make a backend or tokenizer under a given H3_* switch (the
// switches are read when those are made).
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace h3 {

class ScopedEnv {
 public:
  // value nullptr: unset for the scope.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace h3

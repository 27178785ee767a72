// An environment variable set for one scope, and put back as it was when the scope ends (also
// when an assertion returns early). Child processes started meanwhile (run_crest, and mpirun's
// local ranks, which inherit mpirun's environment) see it.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace crest::test {

class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace crest::test

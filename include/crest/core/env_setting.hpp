// Settings read from environment variables (CREST_WINOGRAD, CREST_CUDA_TF32, CREST_CUDA_LAYOUT,
// CREST_CUDNN_ALGORITHMS): each takes one of a few spellings, and any other is a usage error
// naming the variable, the value and every accepted spelling with what it does, so that a job
// script's typo stops the run instead of silently running the default.
#pragma once
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

#include "crest/core/error.hpp"

namespace crest {

template <typename T>
struct EnvChoice {
  std::string_view spelling;  // "" stands for the variable unset (or set to nothing)
  T value;
  std::string_view meaning;  // for the error message: "never Winograd"
};

// The value of environment variable `name` among `choices`, read at each call.
template <typename T>
T env_setting(const char* name, std::initializer_list<EnvChoice<T>> choices) {
  const char* set = std::getenv(name);
  const std::string_view value = set != nullptr ? set : "";
  std::string accepted;
  for (const EnvChoice<T>& c : choices) {
    if (c.spelling == value) return c.value;
    accepted += std::string(accepted.empty() ? "" : ", ") +
                (c.spelling.empty() ? "unset" : std::string(c.spelling)) + ": " +
                std::string(c.meaning);
  }
  throw_usage(std::string(name) + ": '" + std::string(value) + "' is not a setting (" + accepted +
              ")");
}

}  // namespace crest

// A setting as the reference framework names it in the MLPerf log: an optimizer's parameter
// group (opt_<key>, torch's param_groups, apex's FusedLAMB) or a learning-rate scheduler's
// settings (scheduler_<key>, the DeepCAM reference's). Integers stay integers: the log's JSON
// keeps the reference's types.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace crest {

using LoggedValue =
    std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;
struct LoggedEntry {
  std::string key;
  LoggedValue value;
};

}  // namespace crest

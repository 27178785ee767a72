#include "config/table.hpp"

namespace crest::config {

NumberCheck any_number() {
  return [](double) { return std::string(); };
}

NumberCheck positive() {
  return [](double v) { return v > 0 ? "" : "must be positive, got " + format_double(v); };
}

NumberCheck non_negative() {
  return [](double v) { return v >= 0 ? "" : "must not be negative, got " + format_double(v); };
}

NumberCheck unit_interval() {
  return [](double v) {
    return v >= 0 && v < 1 ? "" : "expected a value in [0, 1), got " + format_double(v);
  };
}

NumberCheck positive_up_to(double max) {
  return [max](double v) {
    return v > 0 && v <= max
               ? ""
               : "must be in (0, " + format_double(max) + "], got " + format_double(v);
  };
}

}  // namespace crest::config

// Array shapes as the module's messages print them ("[2, 32, 32, 32, 4]"): any rank, since a
// caller's array may have more axes than crest::Shape holds.
#pragma once
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <vector>

namespace crest::python {

template <typename... Ts>
std::vector<int64_t> shape_of(const nanobind::ndarray<Ts...>& a) {
  std::vector<int64_t> s;
  for (size_t i = 0; i < a.ndim(); ++i) s.push_back(static_cast<int64_t>(a.shape(i)));
  return s;
}

inline std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace crest::python

// A registry of named entries filled by registration lines during static initialisation (layer
// kinds, models): one entry per name, lookups by name, and an error for an unknown name that
// lists the registered ones.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "crest/core/error.hpp"

namespace crest {

// "a, b, c": registered names in messages.
inline std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

template <typename T>
class NameRegistry {
 public:
  // `what` names an entry in messages: "layer kind", "model".
  explicit NameRegistry(std::string what) : what_(std::move(what)) {}

  bool add(const std::string& name, T entry) {
    CREST_CHECK(entries_.emplace(name, std::move(entry)).second,
                what_ + " '" + name + "' registered twice");
    return true;
  }
  const T* find(const std::string& name) const {
    const auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }
  // Throws crest::Error (input) naming `name` and the registered ones; `more` is added to that
  // list ("; or graph, with layers:").
  const T& at(const std::string& name, const std::string& more = "") const {
    if (const T* e = find(name)) return *e;
    throw_input("unknown " + what_ + " '" + name + "' (registered: " + join_names(names()) + more +
                ")");
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, entry] : entries_) out.push_back(name);
    return out;
  }

 private:
  std::string what_;
  std::map<std::string, T> entries_;
};

}  // namespace crest

// Typed attributes of a graph node: what a layer is, as data. A node's attributes are complete
// and canonical once the graph holds it (every key its layer kind knows, defaults filled in), so
// two graphs that describe the same network compare equal however they were written (C++ or
// YAML).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace crest {

enum class AttrType : uint8_t { boolean, integer, number, text, integers, numbers };

using AttrValue =
    std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

// "integer list", "number", ... for error messages.
std::string attr_type_name(AttrType t);
AttrType attr_type_of(const AttrValue& v);
// Flow-style YAML text of a value: 3, 0.3, true, max, [3, 3, 3].
std::string attr_text(const AttrValue& v);

class Attributes {
 public:
  void set(const std::string& key, AttrValue value) { items_[key] = std::move(value); }
  const AttrValue* find(const std::string& key) const;
  const std::map<std::string, AttrValue>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  bool operator==(const Attributes& o) const = default;
  // "{kernel: [3, 3], out_channels: 4}"
  std::string str() const;

 private:
  std::map<std::string, AttrValue> items_;
};

}  // namespace crest

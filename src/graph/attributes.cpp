#include "crest/graph/attributes.hpp"

#include <charconv>

namespace crest {
namespace {

// Shortest text that reads back as the same double.
std::string number_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  return std::string(buf, end);
}

template <typename T, typename F>
std::string list_text(const std::vector<T>& values, F text) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + text(values[i]);
  return s + "]";
}

}  // namespace

std::string attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::boolean:
      return "boolean";
    case AttrType::integer:
      return "integer";
    case AttrType::number:
      return "number";
    case AttrType::text:
      return "string";
    case AttrType::integers:
      return "list of integers";
    case AttrType::numbers:
      return "list of numbers";
  }
  return "?";
}

AttrType attr_type_of(const AttrValue& v) { return static_cast<AttrType>(v.index()); }

std::string attr_text(const AttrValue& v) {
  struct Text {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return number_text(d); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::vector<int64_t>& l) const {
      return list_text(l, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<double>& l) const { return list_text(l, number_text); }
  };
  return std::visit(Text{}, v);
}

const AttrValue* Attributes::find(const std::string& key) const {
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : &it->second;
}

std::string Attributes::str() const {
  std::string s = "{";
  for (const auto& [key, value] : items_)
    s += (s.size() > 1 ? ", " : "") + key + ": " + attr_text(value);
  return s + "}";
}

}  // namespace crest

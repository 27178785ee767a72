#include "config/text.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>

namespace crest::config {

std::string format_double(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".ni") != std::string::npos) return s;  // has a dot, or inf/nan
  const auto e = s.find('e');
  if (e == std::string::npos) return s + ".0";
  return s.substr(0, e) + ".0" + s.substr(e);
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string describe(const YAML::Node& v) {
  if (!v.IsDefined() || v.IsNull()) return "null";
  if (v.IsScalar()) return quote(v.Scalar());
  YAML::Emitter e;
  e << YAML::Flow << v;
  std::string s = e.c_str();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string yaml_text(const AttrValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return format_double(*d);
  if (const auto* l = std::get_if<std::vector<double>>(&v)) {
    std::string s = "[";
    for (size_t i = 0; i < l->size(); ++i) s += (i ? ", " : "") + format_double((*l)[i]);
    return s + "]";
  }
  if (const auto* t = std::get_if<std::string>(&v)) return *t;  // enum spellings: plain words
  return attr_text(v);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string join_list(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

}  // namespace crest::config

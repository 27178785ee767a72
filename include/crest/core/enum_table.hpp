// One table per enum gives both directions, parsing and printing, so the spellings accepted in a
// file and the ones printed back can never drift apart.
//
//   template <> inline constexpr EnumEntries<PoolKind, 3> kEnumTable<PoolKind> = {{...}};
//   enum_name(PoolKind::max) == "max";  parse_enum<PoolKind>("max", "pool.kind")
#pragma once
#include <array>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "crest/core/error.hpp"

namespace crest {

template <typename E, size_t N>
using EnumEntries = std::array<std::pair<E, std::string_view>, N>;

// Specialised next to each enum that is read from or written to text.
template <typename E>
inline constexpr std::array<std::pair<E, std::string_view>, 0> kEnumTable{};

template <typename E>
std::string enum_name(E value) {
  for (const auto& [v, name] : kEnumTable<E>)
    if (v == value) return std::string(name);
  return "?";
}

// The names a value may be written as, for error messages: "max, avg_include_pad".
template <typename E>
std::string enum_choices() {
  std::string s;
  for (const auto& entry : kEnumTable<E>) s += (s.empty() ? "" : ", ") + std::string(entry.second);
  return s;
}

// Throws crest::Error (input) naming `what` and the accepted spellings.
template <typename E>
E parse_enum(std::string_view text, const std::string& what) {
  for (const auto& [v, name] : kEnumTable<E>)
    if (name == text) return v;
  throw_input(what + ": unknown value '" + std::string(text) + "' (one of: " + enum_choices<E>() +
              ")");
}

// Files written for other tools spell values loosely (LeakyReLU, leaky_relu; AveragePooling3D).
// A table may list several spellings of one value, the first being the one printed; these match
// any of them ignoring case, '_' and '-'.
inline std::string fold_spelling(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <typename E>
std::optional<E> match_enum_spelling(std::string_view text) {
  for (const auto& [v, name] : kEnumTable<E>)
    if (fold_spelling(name) == fold_spelling(text)) return v;
  return std::nullopt;
}

// The printed spelling of each value, for error messages: "LeakyReLU, ReLU, Tanh".
template <typename E>
std::string enum_primary_choices() {
  std::string s;
  for (const auto& [v, name] : kEnumTable<E>)
    if (enum_name(v) == name) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

}  // namespace crest

// A config section as one table: each row is a key with how it is read (type and checks) and how
// it is printed into the resolved YAML. Defaults are the section struct's member initialisers: a
// key that is absent or null leaves its member as it is. The schema (the keys a section accepts),
// the loader and the printer all come from the same rows, so they cannot drift apart.
#pragma once
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "config/reader.hpp"
#include "config/text.hpp"
#include "crest/core/name_registry.hpp"

namespace crest::config {

// The lines of one section in resolved YAML.
class Lines {
 public:
  void add(const std::string& key, const std::string& value) {
    text_ += "  " + key + ": " + value + "\n";
  }
  void raw(const std::string& line) { text_ += line + "\n"; }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

template <typename S>
struct Field {
  std::string key;
  std::function<void(const SectionReader&, S&)> read;
  // Empty for an alias, which is printed under its canonical key (shuffle_train as shuffle).
  std::function<void(const S&, Lines&)> print;
};

template <typename S>
struct Table {
  std::string section;
  std::vector<Field<S>> fields;
  // Rules across keys, run after every field is read (may be empty).
  std::function<void(const SectionReader&, S&)> check;

  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const auto& f : fields) k.push_back(f.key);
    return k;
  }
};

template <typename S>
void read_table(const Table<S>& t, const SectionReader& r, S& s) {
  for (const auto& f : t.fields) f.read(r, s);
  if (t.check) t.check(r, s);
}

// "\nsection:\n  key: value\n..."
template <typename S>
std::string print_table(const Table<S>& t, const S& s) {
  Lines lines;
  for (const auto& f : t.fields)
    if (f.print) f.print(s, lines);
  return "\n" + t.section + ":\n" + lines.str();
}

// ---- Rows for the common kinds of value.

// A number's check: the problem with `v` ("must be positive, got 0.0"), or "" when it is fine.
using NumberCheck = std::function<std::string(double v)>;
NumberCheck any_number();
NumberCheck positive();
NumberCheck non_negative();
NumberCheck unit_interval();             // [0, 1)
NumberCheck positive_up_to(double max);  // (0, max]

template <typename S, typename M>
Field<S> int_field(const std::string& key, M S::*m, int64_t min,
                   int64_t max = std::numeric_limits<int32_t>::max()) {
  return {key,
          [=](const SectionReader& r, S& s) {
            if (auto v = r.opt_int(key, min, max)) s.*m = static_cast<M>(*v);
          },
          [=](const S& s, Lines& l) { l.add(key, std::to_string(s.*m)); }};
}

template <typename S>
Field<S> number_field(const std::string& key, double S::*m, const NumberCheck& check) {
  return {key,
          [=](const SectionReader& r, S& s) {
            if (auto v = r.opt_double(key)) {
              if (const std::string problem = check(*v); !problem.empty()) r.fail(key, problem);
              s.*m = *v;
            }
          },
          [=](const S& s, Lines& l) { l.add(key, format_double(s.*m)); }};
}

template <typename S>
Field<S> bool_field(const std::string& key, bool S::*m) {
  return {key,
          [=](const SectionReader& r, S& s) {
            if (auto v = r.opt_bool(key)) s.*m = *v;
          },
          [=](const S& s, Lines& l) { l.add(key, s.*m ? "true" : "false"); }};
}

// Printed quoted, and left out when empty (its default).
template <typename S>
Field<S> string_field(const std::string& key, std::string S::*m) {
  return {key,
          [=](const SectionReader& r, S& s) {
            if (auto v = r.opt_string(key)) s.*m = *v;
          },
          [=](const S& s, Lines& l) {
            if (!(s.*m).empty()) l.add(key, quote(s.*m));
          }};
}

// One of a few words (dist.backend: auto, mpi, single), printed as is.
template <typename S>
Field<S> word_field(const std::string& key, std::string S::*m,
                    const std::vector<std::string>& words, const std::string& expected) {
  return {key,
          [=](const SectionReader& r, S& s) {
            const auto v = r.opt_string(key);
            if (!v) return;
            if (std::find(words.begin(), words.end(), *v) == words.end())
              r.fail(key, "unknown value " + quote(*v) + " (" + expected + ")");
            s.*m = *v;
          },
          [=](const S& s, Lines& l) { l.add(key, s.*m); }};
}

// An enum by its kEnumTable, printed by its first spelling.
template <typename S, typename E>
Field<S> enum_field(const std::string& key, E S::*m) {
  return {key,
          [=](const SectionReader& r, S& s) {
            if (auto v = r.opt_enum<E>(key)) s.*m = *v;
          },
          [=](const S& s, Lines& l) { l.add(key, enum_name(s.*m)); }};
}

// The name of a registered entry (an optimizer, a dataset, a schedule type): matched against
// `names()` ignoring case, '_' and '-', stored and printed as registered. Errors list the names.
// Not `required`: a missing key keeps the default.
template <typename S>
Field<S> registered_name_field(const std::string& key, std::string S::*m,
                               const std::function<std::vector<std::string>()>& names,
                               bool required = true) {
  return {key,
          [=](const SectionReader& r, S& s) {
            const auto text = r.opt_string(key);
            const std::string known = join_names(names());
            if (!text && !required) return;
            if (!text) r.fail(key, "required key is missing (" + known + ")");
            for (const auto& n : names())
              if (fold_spelling(n) == fold_spelling(*text)) {
                s.*m = n;
                return;
              }
            r.fail(key, "unknown value " + quote(*text) + " (expected one of: " + known + ")");
          },
          [=](const S& s, Lines& l) { l.add(key, s.*m); }};
}

// `f`, and an error naming the key when it is missing; `hint` says what it wants.
template <typename S>
Field<S> required(Field<S> f, const std::string& hint = "") {
  auto read = f.read;
  f.read = [read, key = f.key, hint](const SectionReader& r, S& s) {
    if (!r.has(key)) r.fail(key, "required key is missing" + hint);
    read(r, s);
  };
  return f;
}

}  // namespace crest::config

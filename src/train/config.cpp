#include "crest/train/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/graph/graph_yaml.hpp"

namespace crest {

namespace {

// ---------------------------------------------------------------------------------------------
// Schema: the keys each section accepts. Reference keys first, crest additions after.

const std::vector<std::pair<std::string, std::vector<std::string>>>& schema() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> s = {
      {"",
       {"output_dir", "mlperf", "data", "model", "optimizer", "lr_schedule", "train", "crest",
        "dist"}},
      {"mlperf",
       {"org", "division", "status", "platform",
        // crest additions
        "stdout"}},
      {"data",
       {"name", "data_dir", "compression", "n_train", "n_valid", "sample_shape", "target_shape",
        "batch_size", "n_epochs", "shard", "apply_log", "prefetch", "n_parallel_reads",
        "samples_per_file", "shuffle_train", "shuffle_valid",
        // crest additions
        "shuffle", "seed", "cache_bytes", "stage_dir", "on_error", "format"}},
      {"model",
       {"name", "input_shape", "kernel_size", "target_size", "conv_size", "n_conv_layers",
        "fc1_size", "fc2_size", "hidden_activation", "pooling_type", "dropout", "l2",
        // crest additions: a network given as a graph (docs/models.md)
        "inputs", "layers", "outputs", "loss"}},
      {"optimizer",
       {"name", "lr", "learning_rate", "momentum", "nesterov", "betas", "beta_1", "beta_2", "eps",
        "epsilon", "weight_decay"}},
      {"lr_schedule",
       {"base_lr", "scaling", "base_batch_size", "n_warmup_epochs", "decay_schedule"}},
      {"train",
       {"loss", "metrics", "early_stopping_patience", "target_mae",
        // crest additions
        "checkpoint_every", "checkpoint_keep", "log_every_s", "report"}},
      {"crest", {"backend", "threads"}},
      {"dist", {"backend", "bucket_mb", "first_bucket_mb", "timeout_s", "timeline", "compress"}},
  };
  return s;
}

const std::vector<std::string>* keys_of(const std::string& section) {
  for (const auto& [name, keys] : schema())
    if (name == section) return &keys;
  return nullptr;
}

// Maps whose keys are data rather than schema (epochs in the decay schedule).
bool is_free_map(const std::string& path) { return path == "lr_schedule.decay_schedule"; }

std::string join(const std::string& section, const std::string& key) {
  return section.empty() ? key : section + "." + key;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean data.batch_size?)" or the list of keys the section accepts.
std::string suggestion(const std::string& section, const std::string& key) {
  const auto& known = *keys_of(section);
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& k : known) {
    const size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  if (!best.empty()) return " (did you mean " + join(section, best) + "?)";
  // A known key in the wrong section is a common slip (batch_size under model:).
  for (const auto& [other, keys] : schema())
    if (other != section && std::find(keys.begin(), keys.end(), key) != keys.end())
      return " (it belongs in another section: " + join(other, key) + ")";
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  return " (" + (section.empty() ? std::string("top-level keys") : section + " accepts") + ": " +
         list + ")";
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Case-insensitive, ignoring '_' and '-': "LeakyReLU", "leaky_relu" and "leaky-relu" all match.
std::string fold(const std::string& s) {
  std::string out;
  for (char c : lower(s))
    if (c != '_' && c != '-') out += c;
  return out;
}

// Shortest round-trip text of a double, spelled so that YAML 1.1 loaders (PyYAML, as used by the
// reference) also read it as a float: they need a '.' in every float.
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

// How a value is shown in "got ..." messages.
std::string describe(const YAML::Node& v) {
  if (!v.IsDefined() || v.IsNull()) return "null";
  if (v.IsScalar()) return quote(v.Scalar());
  YAML::Emitter e;
  e << YAML::Flow << v;
  std::string s = e.c_str();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Quoted scalars ('4', "true") are strings in YAML; the reference (PyYAML) would pass them on as
// strings and fail later, so numbers and booleans must be plain.
bool is_quoted(const YAML::Node& v) { return v.Tag() == "!"; }

std::string shape_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// ---------------------------------------------------------------------------------------------
// The loader: one source (file name), the overrides applied to it, and typed access to the tree
// with errors that say where.

struct Entry {
  YAML::Node key;
  YAML::Node value;
};

struct Section {
  std::string path;  // "" for the top level
  YAML::Node key;    // the section's own key (for "missing" errors)
  std::map<std::string, Entry> entries;
};

class Loader {
 public:
  explicit Loader(std::string source) : source_(std::move(source)) {}

  void apply_override(YAML::Node& root, const std::string& text);
  Config build(const YAML::Node& root);

 private:
  // "file:line: path" or "file: path (from override 'x=y')".
  std::string where(const std::string& path, const YAML::Node& at) const {
    for (const auto& [key, text] : overridden_) {
      if (path == key || path.rfind(key + ".", 0) == 0 || path.rfind(key + "[", 0) == 0)
        return source_ + ": " + path + " (from override '" + text + "')";
    }
    const int line = at.IsDefined() ? at.Mark().line : -1;
    if (line >= 0) return source_ + ":" + std::to_string(line + 1) + ": " + path;
    return source_ + ": " + path;
  }
  [[noreturn]] void fail(const std::string& path, const YAML::Node& at,
                         const std::string& message) const {
    throw_input(where(path, at) + ": " + message);
  }
  [[noreturn]] void fail(const Section& s, const std::string& key,
                         const std::string& message) const {
    const auto it = s.entries.find(key);
    fail(join(s.path, key), it == s.entries.end() ? s.key : it->second.key, message);
  }
  bool overridden(const std::string& path) const {
    for (const auto& [key, text] : overridden_)
      if (path == key || path.rfind(key + ".", 0) == 0) return true;
    return false;
  }

  Section section(const Section& parent, const std::string& key);
  void read_graph_model(const Section& model, const YAML::Node& node, ModelConfig& m) const;

  // The value of `key`, or nullptr when absent or null (null means "use the default").
  const Entry* get(const Section& s, const std::string& key) const {
    const auto it = s.entries.find(key);
    if (it == s.entries.end() || it->second.value.IsNull()) return nullptr;
    return &it->second;
  }
  bool has(const Section& s, const std::string& key) const { return get(s, key) != nullptr; }

  int64_t to_int(const std::string& path, const YAML::Node& at, const YAML::Node& v, int64_t min,
                 int64_t max) const;
  double to_double(const std::string& path, const YAML::Node& at, const YAML::Node& v) const;

  std::optional<int64_t> opt_int(const Section& s, const std::string& key, int64_t min,
                                 int64_t max = std::numeric_limits<int32_t>::max()) const {
    const Entry* e = get(s, key);
    if (!e) return std::nullopt;
    return to_int(join(s.path, key), e->key, e->value, min, max);
  }
  std::optional<double> opt_double(const Section& s, const std::string& key) const {
    const Entry* e = get(s, key);
    if (!e) return std::nullopt;
    return to_double(join(s.path, key), e->key, e->value);
  }
  std::optional<bool> opt_bool(const Section& s, const std::string& key) const;
  std::optional<std::string> opt_string(const Section& s, const std::string& key) const;
  // One of `options` (matched by fold()); returns the index into `options`.
  std::optional<size_t> opt_choice(const Section& s, const std::string& key,
                                   const std::vector<std::vector<std::string>>& options) const;
  std::optional<std::vector<int64_t>> opt_int_list(const Section& s, const std::string& key,
                                                   int64_t min) const;
  std::optional<uint64_t> opt_uint64(const Section& s, const std::string& key) const;
  std::optional<int64_t> opt_bytes(const Section& s, const std::string& key) const;

  int64_t req_int(const Section& s, const std::string& key, int64_t min,
                  int64_t max = std::numeric_limits<int32_t>::max()) const {
    if (auto v = opt_int(s, key, min, max)) return *v;
    fail(s, key, "required key is missing");
  }

  std::string source_;
  std::vector<std::pair<std::string, std::string>> overridden_;  // key path -> override text
};

Section Loader::section(const Section& parent, const std::string& key) {
  Section s;
  s.path = join(parent.path, key);
  const auto it = parent.entries.find(key);
  if (it == parent.entries.end()) return s;
  s.key = it->second.key;
  const YAML::Node& v = it->second.value;
  if (v.IsNull()) return s;
  if (!v.IsMap()) fail(s.path, s.key, "expected a section of key: value lines, got " + describe(v));
  const auto* known = keys_of(s.path);
  for (auto kv = v.begin(); kv != v.end(); ++kv) {
    if (!kv->first.IsScalar())
      fail(s.path, kv->first, "keys must be plain names, got " + describe(kv->first));
    const std::string name = kv->first.Scalar();
    const std::string path = join(s.path, name);
    if (known && std::find(known->begin(), known->end(), name) == known->end())
      fail(path, kv->first, "unknown key" + suggestion(s.path, name));
    // PyYAML keeps the last of two equal keys and yaml-cpp the first: refuse to guess.
    if (!s.entries.emplace(name, Entry{kv->first, kv->second}).second)
      fail(path, kv->first, "duplicate key");
  }
  return s;
}

// A network given as a graph: only the graph keys (and name: graph) belong in the section, and the
// graph must fit the CosmoFlow task the trainer runs: inputs x and y, an output and a loss.
void Loader::read_graph_model(const Section& model, const YAML::Node& node, ModelConfig& m) const {
  for (const auto& [key, entry] : model.entries) {
    if (is_graph_yaml_key(key)) continue;
    if (key == "name") {
      if (fold(entry.value.Scalar()) != "graph")
        fail(model, key, "a model given as layers: is named graph, got " + describe(entry.value));
      continue;
    }
    fail(model, key,
         "is an option of the built-in cosmoflow model; a model given as layers: takes only name, "
         "inputs, layers, outputs and loss");
  }
  auto g = std::make_shared<Graph>(graph_from_yaml(node, source_, "model"));
  auto input_shape = [&](const char* name) -> const Shape* {
    for (const auto& in : g->inputs())
      if (in.name == name && !in.integer) return &in.per_sample;
    return nullptr;
  };
  const Shape* x = input_shape("x");
  const Shape* y = input_shape("y");
  if (!x || x->rank() != 4 || !y || y->rank() != 1)
    fail(model, "inputs",
         "the CosmoFlow task needs inputs x [C, D, H, W] (the samples) and y [targets]");
  if (g->outputs().empty()) fail(model, "outputs", "name the prediction (the first output)");
  if (g->loss() < 0) fail(model, "loss", "name the loss value");
  m.name = "graph";
  m.target_size = static_cast<int>((*y)[0]);
  m.graph = std::move(g);
}

int64_t Loader::to_int(const std::string& path, const YAML::Node& at, const YAML::Node& v,
                       int64_t min, int64_t max) const {
  const std::string expected = min == 1   ? "a positive integer"
                               : min == 0 ? "a non-negative integer"
                                          : "an integer";
  if (!v.IsScalar()) fail(path, at, "expected " + expected + ", got " + describe(v));
  if (is_quoted(v))
    fail(path, at,
         "expected " + expected + ", got the string " + describe(v) + " (write it without quotes)");
  std::string s = v.Scalar();
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range)
    fail(path, at, "value " + describe(v) + " is too large");
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    fail(path, at, "expected " + expected + ", got " + describe(v));
  if (out < min) fail(path, at, "expected " + expected + ", got " + std::to_string(out));
  if (out > max)
    fail(path, at,
         "value " + std::to_string(out) + " is too large (at most " + std::to_string(max) + ")");
  return out;
}

double Loader::to_double(const std::string& path, const YAML::Node& at, const YAML::Node& v) const {
  if (!v.IsScalar()) fail(path, at, "expected a number, got " + describe(v));
  if (is_quoted(v))
    fail(path, at,
         "expected a number, got the string " + describe(v) + " (write it without quotes)");
  const std::string& s = v.Scalar();
  errno = 0;
  char* end = nullptr;
  const double out = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || std::isspace(static_cast<unsigned char>(s[0])))
    fail(path, at, "expected a number, got " + describe(v));
  if (!std::isfinite(out) || errno == ERANGE)
    fail(path, at, "expected a finite number, got " + describe(v));
  return out;
}

std::optional<bool> Loader::opt_bool(const Section& s, const std::string& key) const {
  const Entry* e = get(s, key);
  if (!e) return std::nullopt;
  const std::string path = join(s.path, key);
  if (e->value.IsScalar() && !is_quoted(e->value)) {
    // The YAML 1.1 spellings PyYAML reads as booleans (the reference files write True).
    const std::string t = lower(e->value.Scalar());
    if (t == "true" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "no" || t == "off") return false;
  }
  fail(path, e->key, "expected true or false, got " + describe(e->value));
}

std::optional<std::string> Loader::opt_string(const Section& s, const std::string& key) const {
  const Entry* e = get(s, key);
  if (!e) return std::nullopt;
  if (!e->value.IsScalar())
    fail(join(s.path, key), e->key, "expected a string, got " + describe(e->value));
  return e->value.Scalar();
}

std::optional<size_t> Loader::opt_choice(
    const Section& s, const std::string& key,
    const std::vector<std::vector<std::string>>& options) const {
  const auto text = opt_string(s, key);
  if (!text) return std::nullopt;
  for (size_t i = 0; i < options.size(); ++i)
    for (const auto& spelling : options[i])
      if (fold(*text) == fold(spelling)) return i;
  std::string list;
  for (const auto& o : options) list += (list.empty() ? "" : ", ") + o.front();
  fail(s, key, "unknown value " + quote(*text) + " (expected one of: " + list + ")");
}

std::optional<std::vector<int64_t>> Loader::opt_int_list(const Section& s, const std::string& key,
                                                         int64_t min) const {
  const Entry* e = get(s, key);
  if (!e) return std::nullopt;
  const std::string path = join(s.path, key);
  if (!e->value.IsSequence())
    fail(path, e->key, "expected a list like [128, 128, 128, 4], got " + describe(e->value));
  std::vector<int64_t> out;
  for (size_t i = 0; i < e->value.size(); ++i) {
    const YAML::Node item = e->value[i];
    out.push_back(to_int(path + "[" + std::to_string(i) + "]", e->key, item, min,
                         std::numeric_limits<int32_t>::max()));
  }
  return out;
}

std::optional<uint64_t> Loader::opt_uint64(const Section& s, const std::string& key) const {
  const Entry* e = get(s, key);
  if (!e) return std::nullopt;
  const std::string path = join(s.path, key);
  if (e->value.IsScalar() && !is_quoted(e->value)) {
    const std::string& t = e->value.Scalar();
    uint64_t out = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    if (ec == std::errc() && end == t.data() + t.size() && !t.empty()) return out;
  }
  fail(path, e->key, "expected a non-negative integer, got " + describe(e->value));
}

// A byte count: an integer, or a number with a unit. K/M/G/T and KiB/MiB/GiB/TiB are binary (as
// in Slurm and most HPC tools); KB/MB/GB/TB are decimal.
std::optional<int64_t> Loader::opt_bytes(const Section& s, const std::string& key) const {
  const Entry* e = get(s, key);
  if (!e) return std::nullopt;
  const std::string path = join(s.path, key);
  const std::string bad = "expected a byte count like 4294967296 or \"4GiB\", got ";
  if (!e->value.IsScalar()) fail(path, e->key, bad + describe(e->value));
  const std::string t = e->value.Scalar();
  char* end = nullptr;
  const double number = std::strtod(t.c_str(), &end);
  std::string unit = lower(std::string(end));
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1},       {"b", 1},        {"k", 0x1p10},   {"kib", 0x1p10}, {"kb", 1e3},
      {"m", 0x1p20}, {"mib", 0x1p20}, {"mb", 1e6},     {"g", 0x1p30},   {"gib", 0x1p30},
      {"gb", 1e9},   {"t", 0x1p40},   {"tib", 0x1p40}, {"tb", 1e12}};
  if (end == t.c_str() || !std::isfinite(number)) fail(path, e->key, bad + describe(e->value));
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    const double bytes = number * scale;
    if (bytes < 0) fail(path, e->key, "must not be negative, got " + describe(e->value));
    if (bytes > 9.0e18) fail(path, e->key, "value " + describe(e->value) + " is too large");
    return static_cast<int64_t>(bytes);
  }
  fail(path, e->key, bad + describe(e->value));
}

// ---------------------------------------------------------------------------------------------
// Overrides

void Loader::apply_override(YAML::Node& root, const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw_usage("override '" + text +
                "': expected key.path=value, e.g. data.batch_size=2 or "
                "data.sample_shape=[32,32,32,4]");
  const std::string key = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  std::vector<std::string> segs;
  for (size_t pos = 0;;) {
    const auto dot = key.find('.', pos);
    segs.push_back(key.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  for (const auto& seg : segs)
    if (seg.empty() || seg.find_first_of(" \t[]") != std::string::npos)
      throw_usage("override '" + text + "': malformed key path '" + key + "'");

  // The path must name a key the schema knows, exactly as a key in the file would.
  const std::string prefix = source_ + ": override '" + text + "': ";
  std::string section;
  for (size_t i = 0; i < segs.size(); ++i) {
    const std::string path = join(section, segs[i]);
    if (is_free_map(section)) {
      if (i + 1 != segs.size()) throw_input(prefix + path + " is not a section");
      break;
    }
    const auto* known = keys_of(section);
    if (!known) throw_input(prefix + section + " is not a section");
    if (std::find(known->begin(), known->end(), segs[i]) == known->end())
      throw_input(prefix + "unknown key " + path + suggestion(section, segs[i]));
    section = path;
  }

  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    throw_usage("override '" + text + "': the value is not valid YAML: " + e.msg);
  }

  if (!root.IsMap()) root = YAML::Node(YAML::NodeType::Map);  // an empty file
  YAML::Node cur = root;
  std::string walked;
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    walked = join(walked, segs[i]);
    YAML::Node next = cur[segs[i]];
    if (!next.IsDefined() || next.IsNull()) {
      cur[segs[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(cur[segs[i]]);
    } else if (!next.IsMap()) {
      throw_input(prefix + walked + " is not a section (the file sets it to " + describe(next) +
                  ")");
    }
    // reset() rebinds; operator= would overwrite the node `cur` refers to.
    cur.reset(next);
  }
  cur[segs.back()] = value;
  // A later override of the same key wins; remember only the latest text for messages.
  overridden_.erase(std::remove_if(overridden_.begin(), overridden_.end(),
                                   [&](const auto& o) { return o.first == key; }),
                    overridden_.end());
  overridden_.emplace_back(key, text);
}

// ---------------------------------------------------------------------------------------------
// Building and validating the typed config

Config Loader::build(const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) throw_input(source_ + ": the configuration is empty");
  if (!root.IsMap())
    throw_input(source_ + ": expected key: value lines at the top level, got " + describe(root));

  Config c;
  c.source = source_;

  Section top;
  {
    Entry whole{YAML::Node(), root};
    Section holder;
    holder.entries.emplace("", whole);
    // Validate the top level like any section (unknown keys, duplicates).
    top = section(holder, "");
    top.path = "";
  }

  // ---- output_dir
  if (auto v = opt_string(top, "output_dir")) {
    if (v->empty()) fail(top, "output_dir", "must not be empty");
    c.output_dir = *v;
  } else {
    c.output_dir = "runs/" + std::filesystem::path(source_).stem().string();
  }

  // ---- mlperf
  const Section mlperf = section(top, "mlperf");
  c.mlperf.present = top.entries.count("mlperf") > 0;
  c.mlperf.org = opt_string(mlperf, "org").value_or("");
  if (auto d = opt_string(mlperf, "division")) {
    if (*d != "closed" && *d != "open")
      fail(mlperf, "division", "expected closed or open, got " + quote(*d));
    c.mlperf.division = *d;
  }
  c.mlperf.status = opt_string(mlperf, "status").value_or("");
  c.mlperf.platform = opt_string(mlperf, "platform").value_or("");
  c.mlperf.echo_stdout = opt_bool(mlperf, "stdout").value_or(false);

  // ---- model (first: the data shape checks need n_conv_layers)
  if (!top.entries.count("model")) throw_input(source_ + ": model: required section is missing");
  const Section model = section(top, "model");
  ModelConfig& m = c.model;
  if (model.entries.count("layers")) {
    read_graph_model(model, top.entries.at("model").value, m);
  } else if (auto name = opt_choice(model, "name", {{"cosmoflow"}})) {
    (void)name;
    m.name = "cosmoflow";
  } else {
    fail(model, "name",
         "required key is missing (the model to build: cosmoflow, or a graph given as layers:)");
  }
  for (const char* key : {"inputs", "outputs", "loss"})
    if (!m.graph && model.entries.count(key))
      fail(model, key, "belongs to a model given as layers:, and there is no model.layers");
  m.kernel_size = static_cast<int>(opt_int(model, "kernel_size", 1).value_or(m.kernel_size));
  // 'same' padding with an even kernel pads asymmetrically; crest's conv kernels do not.
  if (m.kernel_size % 2 == 0)
    fail(model, "kernel_size",
         "expected an odd kernel size ('same' padding), got " + std::to_string(m.kernel_size));
  m.target_size = static_cast<int>(opt_int(model, "target_size", 1).value_or(m.target_size));
  m.conv_size = static_cast<int>(opt_int(model, "conv_size", 1).value_or(m.conv_size));
  m.n_conv_layers =
      static_cast<int>(opt_int(model, "n_conv_layers", 1, 20).value_or(m.n_conv_layers));
  m.fc1_size = static_cast<int>(opt_int(model, "fc1_size", 1).value_or(m.fc1_size));
  m.fc2_size = static_cast<int>(opt_int(model, "fc2_size", 1).value_or(m.fc2_size));
  if (auto a = opt_choice(model, "hidden_activation",
                          {{"LeakyReLU", "leaky_relu", "lrelu"}, {"ReLU"}, {"Tanh"}}))
    m.hidden_activation = static_cast<Activation>(*a);
  if (auto p = opt_choice(model, "pooling_type",
                          {{"MaxPool3D", "MaxPooling3D", "max"},
                           {"AvgPool3D", "AveragePooling3D", "AvgPooling3D", "avg", "average"}}))
    m.pooling_type = static_cast<Pooling>(*p);
  if (auto d = opt_double(model, "dropout")) {
    if (*d < 0 || *d >= 1)
      fail(model, "dropout", "expected a probability in [0, 1), got " + format_double(*d));
    m.dropout = *d;
  }
  if (auto l2 = opt_double(model, "l2")) {
    if (*l2 < 0) fail(model, "l2", "must not be negative, got " + format_double(*l2));
    m.l2 = *l2;
  }

  // ---- data
  if (!top.entries.count("data")) throw_input(source_ + ": data: required section is missing");
  const Section data = section(top, "data");
  DataConfig& d = c.data;
  if (auto k = opt_choice(data, "name", {{"cosmo"}, {"dummy"}}))
    d.name = static_cast<DatasetKind>(*k);
  else
    fail(data, "name", "required key is missing (cosmo or dummy)");
  if (auto dir = opt_string(data, "data_dir")) d.data_dir = *dir;
  if (d.name == DatasetKind::cosmo && d.data_dir.empty())
    fail(data, "data_dir",
         "required for data.name: cosmo (the directory holding train/ and "
         "validation/), or use data.name: dummy for synthetic data");
  if (auto comp = opt_string(data, "compression")) {
    const std::string t = lower(*comp);
    if (t == "gzip")
      d.compression = Compression::gzip;
    else if (t.empty() || t == "none")
      d.compression = Compression::none;
    else
      fail(data, "compression", "expected null (uncompressed) or GZIP, got " + quote(*comp));
  }
  d.n_train = req_int(data, "n_train", 1, std::numeric_limits<int64_t>::max());
  d.n_valid = opt_int(data, "n_valid", 0, std::numeric_limits<int64_t>::max()).value_or(0);
  d.batch_size = req_int(data, "batch_size", 1);
  d.n_epochs = static_cast<int>(req_int(data, "n_epochs", 1));
  if (d.n_train < d.batch_size)
    fail(data, "n_train",
         std::to_string(d.n_train) + " samples make no batch of data.batch_size " +
             std::to_string(d.batch_size));
  if (d.n_valid > 0 && d.n_valid < d.batch_size)
    fail(data, "n_valid",
         std::to_string(d.n_valid) + " samples make no batch of data.batch_size " +
             std::to_string(d.batch_size) + " (use 0 for no validation)");

  const auto sample = opt_int_list(data, "sample_shape", 1);
  if (!sample) fail(data, "sample_shape", "required key is missing ([D, H, W, C])");
  if (sample->size() != 4)
    fail(data, "sample_shape",
         "expected 4 entries [D, H, W, C], got " + std::to_string(sample->size()) + ": " +
             shape_text(*sample));
  // Every conv block halves each spatial size with a 2x2x2 pool (a graph model's own layers are
  // checked when it is compiled).
  const int64_t divisor = m.graph ? 1 : int64_t{1} << m.n_conv_layers;
  for (int i = 0; i < 3; ++i) {
    const int64_t s = (*sample)[static_cast<size_t>(i)];
    if (s % divisor != 0)
      fail(data, "sample_shape",
           "spatial size " + std::to_string(s) + " in " + shape_text(*sample) +
               " is not divisible by " + std::to_string(divisor) + " = 2^model.n_conv_layers (" +
               std::to_string(m.n_conv_layers) + " pooling layers halve it)");
  }
  d.sample_shape = Shape(*sample);

  if (auto input = opt_int_list(model, "input_shape", 1)) {
    // data.sample_shape set on the command line carries input_shape along: in the reference
    // schema input_shape only restates it, and making the user override both is busywork.
    const bool follow = overridden("data.sample_shape") && !overridden("model.input_shape");
    if (!follow && *input != *sample)
      fail(model, "input_shape",
           shape_text(*input) + " differs from data.sample_shape " + shape_text(*sample) +
               " (they must be equal; input_shape may be left out)");
  }
  m.input_shape = d.sample_shape;
  if (m.graph) {
    const Shape& s = d.sample_shape;
    const Shape want{s[3], s[0], s[1], s[2]};
    for (const auto& in : m.graph->inputs())
      if (in.name == "x" && in.per_sample != want)
        fail(data, "sample_shape",
             shape_text(*sample) + " [D, H, W, C] does not match the model's input x " +
                 in.per_sample.str() + " [C, D, H, W] (expected " + want.str() + ")");
  }

  if (auto target = opt_int_list(data, "target_shape", 1)) {
    if (target->size() != 1 || (*target)[0] != m.target_size)
      fail(data, "target_shape",
           shape_text(*target) + " does not match model.target_size " +
               std::to_string(m.target_size) + " (expected [" + std::to_string(m.target_size) +
               "])");
    d.target_shape = Shape(*target);
  } else {
    d.target_shape = Shape{m.target_size};
  }

  d.shard = opt_bool(data, "shard").value_or(d.shard);
  d.apply_log = opt_bool(data, "apply_log").value_or(d.apply_log);
  d.prefetch = static_cast<int>(opt_int(data, "prefetch", 0).value_or(d.prefetch));
  d.n_parallel_reads =
      static_cast<int>(opt_int(data, "n_parallel_reads", 0).value_or(d.n_parallel_reads));
  d.samples_per_file =
      static_cast<int>(opt_int(data, "samples_per_file", 1).value_or(d.samples_per_file));
  if (d.samples_per_file != 1)
    fail(data, "samples_per_file",
         "crest reads one sample per file (the reference data layout); got " +
             std::to_string(d.samples_per_file));
  d.shuffle_valid = opt_bool(data, "shuffle_valid").value_or(d.shuffle_valid);
  {
    const auto shuffle = opt_bool(data, "shuffle");
    const auto shuffle_train = opt_bool(data, "shuffle_train");
    if (shuffle && shuffle_train && *shuffle != *shuffle_train)
      fail(data, "shuffle", "contradicts data.shuffle_train (the same setting); give one");
    d.shuffle = shuffle.value_or(shuffle_train.value_or(d.shuffle));
  }
  d.seed = opt_uint64(data, "seed").value_or(d.seed);
  d.cache_bytes = opt_bytes(data, "cache_bytes").value_or(d.cache_bytes);
  d.stage_dir = opt_string(data, "stage_dir").value_or("");
  if (auto oe = opt_choice(data, "on_error", {{"fail"}, {"skip"}}))
    d.on_error = static_cast<OnSampleError>(*oe);
  if (auto f = opt_choice(data, "format", {{"tfrecord"}, {"npy"}}))
    d.format = static_cast<SampleFileFormat>(*f);

  // ---- optimizer
  if (!top.entries.count("optimizer"))
    throw_input(source_ + ": optimizer: required section is missing");
  const Section opt = section(top, "optimizer");
  OptimizerConfig& o = c.optimizer;
  if (auto k = opt_choice(opt, "name", {{"SGD"}, {"Adam"}, {"AdamW"}}))
    o.name = static_cast<OptimizerKind>(*k);
  else
    fail(opt, "name", "required key is missing (SGD, Adam or AdamW)");
  const bool sgd = o.name == OptimizerKind::sgd;
  const std::string oname = optimizer_name(o.name);
  // Each optimizer takes only its own settings: a momentum given to Adam would be ignored, and a
  // silently ignored hyperparameter is a wrong experiment.
  auto only_for = [&](const std::string& key, bool allowed, const std::string& who) {
    if (has(opt, key) && !allowed)
      fail(opt, key, "not used by " + oname + " (only " + who + "); remove it or set it to null");
  };
  only_for("momentum", sgd, "SGD");
  only_for("nesterov", sgd, "SGD");
  for (const char* k : {"betas", "beta_1", "beta_2", "eps", "epsilon"})
    only_for(k, !sgd, "Adam, AdamW");
  auto alias = [&](const std::string& a, const std::string& b) {
    if (has(opt, a) && has(opt, b))
      fail(opt, b, "same setting as optimizer." + a + "; give only one");
  };
  alias("lr", "learning_rate");
  alias("eps", "epsilon");
  alias("betas", "beta_1");
  alias("betas", "beta_2");

  auto unit_interval = [&](const std::string& key, double v) {
    if (v < 0 || v >= 1) fail(opt, key, "expected a value in [0, 1), got " + format_double(v));
    return v;
  };
  if (auto v = opt_double(opt, "momentum")) o.momentum = unit_interval("momentum", *v);
  o.nesterov = opt_bool(opt, "nesterov").value_or(false);
  if (const Entry* betas = get(opt, "betas")) {
    if (!betas->value.IsSequence() || betas->value.size() != 2)
      fail(opt, "betas", "expected [beta1, beta2], got " + describe(betas->value));
    o.beta1 = unit_interval("betas", to_double("optimizer.betas[0]", betas->key, betas->value[0]));
    o.beta2 = unit_interval("betas", to_double("optimizer.betas[1]", betas->key, betas->value[1]));
  }
  if (auto v = opt_double(opt, "beta_1")) o.beta1 = unit_interval("beta_1", *v);
  if (auto v = opt_double(opt, "beta_2")) o.beta2 = unit_interval("beta_2", *v);
  for (const char* k : {"eps", "epsilon"}) {
    if (auto v = opt_double(opt, k)) {
      if (*v <= 0) fail(opt, k, "must be positive, got " + format_double(*v));
      o.eps = *v;
    }
  }
  o.weight_decay = o.name == OptimizerKind::adamw ? 0.01 : 0.0;
  if (auto v = opt_double(opt, "weight_decay")) {
    if (*v < 0) fail(opt, "weight_decay", "must not be negative, got " + format_double(*v));
    o.weight_decay = *v;
  }
  std::optional<double> opt_lr;
  for (const char* k : {"lr", "learning_rate"}) {
    if (auto v = opt_double(opt, k)) {
      if (*v <= 0) fail(opt, k, "must be positive, got " + format_double(*v));
      opt_lr = *v;
    }
  }

  // ---- lr_schedule
  LrScheduleConfig& l = c.lr_schedule;
  if (top.entries.count("lr_schedule") && !top.entries.at("lr_schedule").value.IsNull()) {
    const Section ls = section(top, "lr_schedule");
    if (opt_lr)
      fail(opt, has(opt, "lr") ? "lr" : "learning_rate",
           "lr_schedule sets the learning rate every epoch, so this would be ignored; set "
           "lr_schedule.base_lr instead");
    if (auto v = opt_double(ls, "base_lr")) {
      if (*v <= 0) fail(ls, "base_lr", "must be positive, got " + format_double(*v));
      l.base_lr = *v;
    } else {
      fail(ls, "base_lr", "required key is missing");
    }
    if (const Entry* e = get(ls, "scaling")) {
      (void)e;
      l.scaling =
          static_cast<LrScaling>(*opt_choice(ls, "scaling", {{"none"}, {"linear"}, {"sqrt"}}));
    }
    if (auto v = opt_int(ls, "base_batch_size", 1, std::numeric_limits<int64_t>::max()))
      l.base_batch_size = *v;
    else if (l.scaling != LrScaling::none)
      fail(ls, "base_batch_size",
           std::string("required with scaling: ") + scaling_name(l.scaling) +
               " (the global batch size at which base_lr applies)");
    l.n_warmup_epochs = static_cast<int>(opt_int(ls, "n_warmup_epochs", 0).value_or(0));
    if (const Entry* e = get(ls, "decay_schedule")) {
      const std::string path = "lr_schedule.decay_schedule";
      if (!e->value.IsMap())
        fail(path, e->key, "expected epoch: factor lines, got " + describe(e->value));
      for (auto kv = e->value.begin(); kv != e->value.end(); ++kv) {
        const std::string kpath = path + "." + (kv->first.IsScalar() ? kv->first.Scalar() : "?");
        const int64_t epoch =
            to_int(kpath, kv->first, kv->first, 0, std::numeric_limits<int32_t>::max());
        const double factor = to_double(kpath, kv->first, kv->second);
        if (factor <= 0)
          fail(kpath, kv->first, "decay factor must be positive, got " + format_double(factor));
        if (!l.decay_schedule.emplace(static_cast<int>(epoch), factor).second)
          fail(kpath, kv->first, "epoch " + std::to_string(epoch) + " appears twice");
      }
    }
  } else {
    l.base_lr = opt_lr.value_or(sgd ? 0.01 : 0.001);  // the Keras defaults
    l.scaling = LrScaling::none;
  }

  // ---- train
  const Section train = section(top, "train");
  TrainConfig& t = c.train;
  if (opt_choice(train, "loss", {{"mse", "mean_squared_error"}})) t.loss = "mse";
  if (const Entry* e = get(train, "metrics")) {
    t.metrics.clear();
    std::vector<YAML::Node> items;
    if (e->value.IsSequence()) {
      for (size_t i = 0; i < e->value.size(); ++i) items.push_back(e->value[i]);
    } else {
      items.push_back(e->value);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string path = "train.metrics[" + std::to_string(i) + "]";
      if (!items[i].IsScalar())
        fail(path, e->key, "expected a metric name, got " + describe(items[i]));
      const std::string name = fold(items[i].Scalar());
      if (name == "meanabsoluteerror" || name == "mae")
        t.metrics.push_back("mean_absolute_error");
      else if (name == "meansquarederror" || name == "mse")
        t.metrics.push_back("mean_squared_error");
      else
        fail(path, e->key,
             "unknown metric " + quote(items[i].Scalar()) +
                 " (expected mean_absolute_error or mean_squared_error)");
    }
  }
  if (auto v = opt_int(train, "early_stopping_patience", 0))
    t.early_stopping_patience = static_cast<int>(*v);
  if (auto v = opt_double(train, "target_mae")) {
    if (*v <= 0) fail(train, "target_mae", "must be positive, got " + format_double(*v));
    t.target_mae = *v;
  }
  if (const Entry* e = get(train, "checkpoint_every")) {
    // "N" or "N epochs" (after every N-th epoch), "N steps" (every N training steps); 0: only at
    // the end of the run.
    const std::string text = e->value.IsScalar() ? e->value.Scalar() : std::string();
    std::istringstream in(text);
    long long n = -1;
    std::string unit, rest;
    in >> n >> unit >> rest;
    const bool ok_unit =
        unit.empty() || unit == "epoch" || unit == "epochs" || unit == "step" || unit == "steps";
    if (!e->value.IsScalar() || in.bad() || n < 0 || n > (1ll << 40) || !ok_unit || !rest.empty())
      fail(train, "checkpoint_every",
           "expected a count of epochs (2, \"2 epochs\") or steps (\"500 steps\"), got " +
               describe(e->value));
    t.checkpoint_every = n;
    t.checkpoint_every_steps = unit.rfind("step", 0) == 0;
  }
  if (auto v = opt_int(train, "checkpoint_keep", 1, 1 << 20))
    t.checkpoint_keep = static_cast<int>(*v);
  if (auto v = opt_double(train, "log_every_s")) {
    if (!(*v > 0)) fail(train, "log_every_s", "must be positive, got " + format_double(*v));
    t.log_every_s = *v;
  }
  if (auto v = opt_bool(train, "report")) t.report = *v;

  // ---- crest
  const Section rt = section(top, "crest");
  if (auto b = opt_string(rt, "backend")) {
    const auto names = backend_names();
    if (std::find(names.begin(), names.end(), *b) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      fail(rt, "backend", "unknown backend " + quote(*b) + " (available: " + list + ")");
    }
    c.crest.backend = *b;
  }
  c.crest.threads = static_cast<int>(opt_int(rt, "threads", 0, 1 << 16).value_or(0));

  // ---- dist
  const Section ds = section(top, "dist");
  if (auto b = opt_string(ds, "backend")) {
    if (*b != "auto" && *b != "mpi" && *b != "single")
      fail(ds, "backend", "unknown value " + quote(*b) + " (expected auto, mpi or single)");
    c.dist.backend = *b;
  }
  auto positive = [&](const char* key, double& out, double max) {
    if (auto v = opt_double(ds, key)) {
      if (!(*v > 0) || *v > max)
        fail(ds, key, "must be in (0, " + format_double(max) + "], got " + format_double(*v));
      out = *v;
    }
  };
  positive("bucket_mb", c.dist.bucket_mb, 4096);
  positive("first_bucket_mb", c.dist.first_bucket_mb, 4096);
  positive("timeout_s", c.dist.timeout_s, 7 * 24 * 3600.0);
  if (auto path = opt_string(ds, "timeline")) c.dist.timeline = *path;
  if (auto z = opt_string(ds, "compress")) {
    if (*z != "none" && *z != "bf16" && *z != "fp16")
      fail(ds, "compress", "unknown value " + quote(*z) + " (expected none, bf16 or fp16)");
    c.dist.compress = *z;
  }

  return c;
}

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw_input(path + ": is a directory, not a config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input(path + ": cannot read config file: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

const char* dataset_name(DatasetKind k) { return k == DatasetKind::dummy ? "dummy" : "cosmo"; }

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::leaky_relu:
      return "LeakyReLU";
    case Activation::relu:
      return "ReLU";
    case Activation::tanh:
      return "Tanh";
  }
  return "?";
}

const char* pooling_name(Pooling p) { return p == Pooling::avg ? "AvgPool3D" : "MaxPool3D"; }

const char* optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd:
      return "SGD";
    case OptimizerKind::adam:
      return "Adam";
    case OptimizerKind::adamw:
      return "AdamW";
  }
  return "?";
}

const char* scaling_name(LrScaling s) {
  switch (s) {
    case LrScaling::none:
      return "none";
    case LrScaling::linear:
      return "linear";
    case LrScaling::sqrt:
      return "sqrt";
  }
  return "?";
}

Config load_config_text(const std::string& yaml, const std::string& source,
                        const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    const std::string at = e.mark.line >= 0 ? ":" + std::to_string(e.mark.line + 1) + ":" +
                                                  std::to_string(e.mark.column + 1)
                                            : "";
    throw_input(source + at + ": YAML syntax error: " + e.msg);
  }
  // Checked before overrides, which would otherwise turn a scalar document into a map.
  if (root.IsDefined() && !root.IsNull() && !root.IsMap())
    throw_input(source + ": expected key: value lines at the top level, got " + describe(root));
  Loader loader(source);
  for (const auto& o : overrides) loader.apply_override(root, o);
  Config c = loader.build(root);
  c.overrides = overrides;
  c.resolved_yaml = to_yaml(c);
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return load_config_text(read_text(path), path, overrides);
}

std::string to_yaml(const Config& c) {
  std::ostringstream y;
  auto ints = [](const Shape& s) {
    std::string out = "[";
    for (int i = 0; i < s.rank(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  };
  y << "# Resolved by crest from " << c.source;
  if (!c.overrides.empty()) {
    y << " with overrides:";
    for (const auto& o : c.overrides) y << ' ' << o;
  }
  y << "\n# Every setting is spelled out; loading this file gives the same configuration.\n";
  y << "output_dir: " << quote(c.output_dir) << "\n";
  if (c.mlperf.present) {
    y << "\nmlperf:\n";
    if (!c.mlperf.org.empty()) y << "  org: " << quote(c.mlperf.org) << "\n";
    if (!c.mlperf.division.empty()) y << "  division: " << c.mlperf.division << "\n";
    if (!c.mlperf.status.empty()) y << "  status: " << quote(c.mlperf.status) << "\n";
    if (!c.mlperf.platform.empty()) y << "  platform: " << quote(c.mlperf.platform) << "\n";
    y << "  stdout: " << (c.mlperf.echo_stdout ? "true" : "false") << "\n";
  }
  const DataConfig& d = c.data;
  y << "\ndata:\n"
    << "  name: " << dataset_name(d.name) << "\n";
  if (!d.data_dir.empty()) y << "  data_dir: " << quote(d.data_dir) << "\n";
  y << "  compression: " << (d.compression == Compression::gzip ? "GZIP" : "null") << "\n"
    << "  n_train: " << d.n_train << "\n"
    << "  n_valid: " << d.n_valid << "\n"
    << "  sample_shape: " << ints(d.sample_shape) << "\n"
    << "  target_shape: " << ints(d.target_shape) << "\n"
    << "  batch_size: " << d.batch_size << "\n"
    << "  n_epochs: " << d.n_epochs << "\n"
    << "  shard: " << (d.shard ? "true" : "false") << "\n"
    << "  apply_log: " << (d.apply_log ? "true" : "false") << "\n"
    << "  prefetch: " << d.prefetch << "\n"
    << "  n_parallel_reads: " << d.n_parallel_reads << "\n"
    << "  samples_per_file: " << d.samples_per_file << "\n"
    << "  shuffle_valid: " << (d.shuffle_valid ? "true" : "false") << "\n"
    << "  shuffle: " << (d.shuffle ? "true" : "false") << "\n"
    << "  seed: " << d.seed << "\n"
    << "  cache_bytes: " << d.cache_bytes << "\n";
  if (!d.stage_dir.empty()) y << "  stage_dir: " << quote(d.stage_dir) << "\n";
  y << "  on_error: " << (d.on_error == OnSampleError::skip ? "skip" : "fail") << "\n";
  y << "  format: " << (d.format == SampleFileFormat::npy ? "npy" : "tfrecord") << "\n";

  const ModelConfig& m = c.model;
  if (m.graph) {
    y << "\nmodel:\n  name: graph\n";
    std::istringstream lines(graph_to_yaml(*m.graph));
    for (std::string line; std::getline(lines, line);) y << "  " << line << "\n";
  } else {
    y << "\nmodel:\n"
      << "  name: " << m.name << "\n"
      << "  input_shape: " << ints(m.input_shape) << "\n"
      << "  kernel_size: " << m.kernel_size << "\n"
      << "  target_size: " << m.target_size << "\n"
      << "  conv_size: " << m.conv_size << "\n"
      << "  n_conv_layers: " << m.n_conv_layers << "\n"
      << "  fc1_size: " << m.fc1_size << "\n"
      << "  fc2_size: " << m.fc2_size << "\n"
      << "  hidden_activation: " << activation_name(m.hidden_activation) << "\n"
      << "  pooling_type: " << pooling_name(m.pooling_type) << "\n"
      << "  dropout: " << format_double(m.dropout) << "\n"
      << "  l2: " << format_double(m.l2) << "\n";
  }

  const OptimizerConfig& o = c.optimizer;
  y << "\noptimizer:\n"
    << "  name: " << optimizer_name(o.name) << "\n";
  if (o.name == OptimizerKind::sgd) {
    y << "  momentum: " << format_double(o.momentum) << "\n"
      << "  nesterov: " << (o.nesterov ? "true" : "false") << "\n";
  } else {
    y << "  betas: [" << format_double(o.beta1) << ", " << format_double(o.beta2) << "]\n"
      << "  eps: " << format_double(o.eps) << "\n";
  }
  y << "  weight_decay: " << format_double(o.weight_decay) << "\n";

  const LrScheduleConfig& l = c.lr_schedule;
  y << "\nlr_schedule:\n"
    << "  base_lr: " << format_double(l.base_lr) << "\n"
    << "  scaling: " << scaling_name(l.scaling) << "\n";
  if (l.base_batch_size > 0) y << "  base_batch_size: " << l.base_batch_size << "\n";
  y << "  n_warmup_epochs: " << l.n_warmup_epochs << "\n";
  if (l.decay_schedule.empty()) {
    y << "  decay_schedule: {}\n";
  } else {
    y << "  decay_schedule:\n";
    for (const auto& [epoch, factor] : l.decay_schedule)
      y << "    " << epoch << ": " << format_double(factor) << "\n";
  }

  const TrainConfig& t = c.train;
  y << "\ntrain:\n"
    << "  loss: " << t.loss << "\n"
    << "  metrics: [";
  for (size_t i = 0; i < t.metrics.size(); ++i) y << (i ? ", " : "") << t.metrics[i];
  y << "]\n";
  if (t.early_stopping_patience)
    y << "  early_stopping_patience: " << *t.early_stopping_patience << "\n";
  if (t.target_mae) y << "  target_mae: " << format_double(*t.target_mae) << "\n";
  y << "  checkpoint_every: "
    << quote(std::to_string(t.checkpoint_every) + (t.checkpoint_every_steps ? " steps" : " epochs"))
    << "\n"
    << "  checkpoint_keep: " << t.checkpoint_keep << "\n"
    << "  log_every_s: " << format_double(t.log_every_s) << "\n"
    << "  report: " << (t.report ? "true" : "false") << "\n";

  y << "\ncrest:\n"
    << "  backend: " << c.crest.backend << "\n"
    << "  threads: " << c.crest.threads << "\n";

  y << "\ndist:\n"
    << "  backend: " << c.dist.backend << "\n"
    << "  bucket_mb: " << format_double(c.dist.bucket_mb) << "\n"
    << "  first_bucket_mb: " << format_double(c.dist.first_bucket_mb) << "\n"
    << "  timeout_s: " << format_double(c.dist.timeout_s) << "\n"
    << "  compress: " << c.dist.compress << "\n";
  if (!c.dist.timeline.empty()) y << "  timeline: " << quote(c.dist.timeline) << "\n";
  return y.str();
}

}  // namespace crest

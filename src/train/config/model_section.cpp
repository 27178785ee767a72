#include "config/model_section.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <sstream>

#include "config/schema.hpp"
#include "crest/graph/graph_yaml.hpp"
#include "crest/models/model_registry.hpp"

namespace crest::config {
namespace {

// "is an option of the built-in cosmoflow model; " for a key some registered model declares.
std::string owner_of(const std::string& key) {
  for (const auto& name : model_names())
    for (const auto& k : find_model_kind(name).keys)
      if (k.key == key) return "is an option of the built-in " + name + " model; ";
  return "is not a key here: ";
}

// The graph section through graph_from_yaml. yaml-cpp's own exceptions can escape it (fuzz_config:
// a key that is not a plain string, `{kind: conv,!kernel: [3]}`, made graph_yaml.cpp's
// as<std::string>() throw YAML::TypedBadConversion, which nothing caught: std::terminate); they
// become the config's input error, naming the file and yaml-cpp's line and column.
Graph graph_of(const SectionReader& r, const YAML::Node& node) {
  try {
    return graph_from_yaml(node, r.source().name(), "model");
  } catch (const YAML::Exception& e) {
    r.fail("layers", "not a graph crest can read: " + e.msg + " at line " +
                         std::to_string(e.mark.line + 1) + ", column " +
                         std::to_string(e.mark.column + 1) +
                         " (every key, name and kind must be a plain string)");
  }
}

// A network given as a graph: only the graph keys (and name: graph) belong in the section, and
// the graph must fit a task the trainer runs: a samples input and a targets input, an output and
// a loss.
ModelConfig read_graph_model(const SectionReader& r, const YAML::Node& node) {
  for (const auto& [key, entry] : r.section().entries) {
    if (is_graph_yaml_key(key)) continue;
    if (key == "name") {
      if (!entry.value.IsScalar() || fold_spelling(entry.value.Scalar()) != "graph")
        r.fail(key, "a model given as layers: is named graph, got " + describe(entry.value));
      continue;
    }
    r.fail(key, owner_of(key) +
                    "a model given as layers: takes only name, inputs, layers, "
                    "outputs and loss");
  }
  auto g = std::make_shared<Graph>(graph_of(r, node));
  // The data feeds the inputs in order (BuiltModel): the samples, then their targets. Which
  // shapes they take is the dataset's business (cross_section.cpp).
  const auto& in = g->inputs();
  if (in.size() != 2 || in[0].integer || in[0].per_sample.rank() < 2)
    r.fail("inputs",
           "a graph model takes two inputs, in order: the samples, channels first ([C, D, H, W] "
           "for CosmoFlow, [C, H, W] for DeepCAM), and their targets ([targets], or DeepCAM's "
           "int32 labels [H, W]) (any names)");
  if (g->outputs().empty()) r.fail("outputs", "name the prediction (the first output)");
  if (g->loss() < 0) r.fail("loss", "name the loss value");
  ModelConfig m;
  m.name = "graph";
  m.graph = std::move(g);
  return m;
}

const ModelKind& named_model(const SectionReader& r) {
  const std::string registered = join_list(model_names());
  const auto name = r.opt_string("name");
  if (!name)
    r.fail("name", "required key is missing (the model to build: " + registered +
                       ", or graph with layers:)");
  if (*name == "graph") r.fail("name", "a graph model needs model.layers (docs/models.md)");
  const ModelKind* kind = find_model_kind_or_null(*name);
  if (!kind)
    r.fail("name", "unknown model " + quote(*name) + " (registered: " + registered +
                       "; or graph, with layers:)");
  return *kind;
}

// One value of the section as the attribute type its key declares.
AttrValue attr_of(const SectionReader& r, const std::string& key, AttrType type) {
  const Entry& e = *r.get(key);
  const std::string path = r.path_of(key);
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(),
                    hi = std::numeric_limits<int64_t>::max();
  const bool list = type == AttrType::integers || type == AttrType::numbers;
  if (list && !e.value.IsSequence())
    r.fail(key, "expected a list like [128, 128, 128, 4], got " + describe(e.value));
  auto item = [&](size_t i) { return path + "[" + std::to_string(i) + "]"; };
  switch (type) {
    case AttrType::boolean:
      return r.to_bool(path, e.key, e.value);
    case AttrType::integer:
      return r.to_int(path, e.key, e.value, lo, hi);
    case AttrType::number:
      return r.to_double(path, e.key, e.value);
    case AttrType::text:
      return *r.opt_string(key);
    case AttrType::integers: {
      std::vector<int64_t> v;
      for (size_t i = 0; i < e.value.size(); ++i)
        v.push_back(r.to_int(item(i), e.key, e.value[i], lo, hi));
      return v;
    }
    case AttrType::numbers: {
      std::vector<double> v;
      for (size_t i = 0; i < e.value.size(); ++i)
        v.push_back(r.to_double(item(i), e.key, e.value[i]));
      return v;
    }
  }
  r.fail(key, "unsupported attribute type");
}

ModelConfig read_registered_model(const SectionReader& r,
                                  const std::map<std::string, TaskValue>& task) {
  const ModelKind& kind = named_model(r);
  std::vector<std::string> known{"name"};
  for (const auto& k : kind.keys) known.push_back(k.key);
  Attributes given;
  for (const auto& [key, entry] : r.section().entries) {
    if (key == "name") continue;
    if (is_graph_yaml_key(key))
      r.fail(key, "belongs to a model given as layers:, and there is no model.layers");
    const std::string& wanted = key;  // (clang 14 cannot capture a structured binding)
    const auto k = std::find_if(kind.keys.begin(), kind.keys.end(),
                                [&](const AttrKey& a) { return a.key == wanted; });
    if (k == kind.keys.end())
      r.fail(key, "unknown key of model " + kind.name + suggestion(r.section().path, key, known));
    if (r.has(key)) given.set(key, attr_of(r, key, k->type));
  }
  for (const auto& k : kind.keys)
    if (const auto t = task.find(k.key); t != task.end()) given.set(k.key, t->second.value);
  ModelConfig m;
  m.name = kind.name;
  try {
    m.attrs = kind.canonical(given);
  } catch (const ModelKeyError& e) {
    if (const auto t = task.find(e.key()); t != task.end()) t->second.fail(e.message());
    r.fail(e.key(), e.message());
  }
  return m;
}

}  // namespace

ModelConfig read_model_section(const Source& src, const Section& section,
                               const std::map<std::string, TaskValue>& task) {
  const SectionReader r(src, section);
  if (section.entries.count("layers")) return read_graph_model(r, section.value);
  return read_registered_model(r, task);
}

std::string print_model_section(const ModelConfig& m) {
  std::string out = "\nmodel:\n  name: " + m.name + "\n";
  if (m.graph) {
    std::istringstream lines(graph_to_yaml(*m.graph));
    for (std::string line; std::getline(lines, line);) out += "  " + line + "\n";
    return out;
  }
  for (const auto& k : find_model_kind(m.name).keys)
    if (const AttrValue* v = m.attrs.find(k.key)) out += "  " + k.key + ": " + yaml_text(*v) + "\n";
  return out;
}

}  // namespace crest::config

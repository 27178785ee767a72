#include "crest/graph/graph_yaml.hpp"

#include <map>
#include <sstream>

#include "crest/core/error.hpp"

namespace crest {
namespace {

class GraphReader {
 public:
  GraphReader(std::string source, std::string path)
      : source_(std::move(source)), path_(std::move(path)) {}

  Graph read(const YAML::Node& section) {
    for (const auto& kv : section) {
      const std::string key = kv.first.as<std::string>();
      if (!is_graph_yaml_key(key) && key != "name")  // a config's model section names itself
        fail(kv.first, path_ + "." + key,
             "unknown key (a graph model has name, inputs, layers, outputs, loss)");
    }
    read_inputs(section["inputs"]);
    const YAML::Node layers = section["layers"];
    if (!layers || !layers.IsSequence() || layers.size() == 0)
      fail(layers ? layers : section, path_ + ".layers", "must be a non-empty list of layers");
    for (size_t i = 0; i < layers.size(); ++i) read_layer(layers[i], i);
    if (const YAML::Node outs = section["outputs"]) {
      if (!outs.IsSequence()) fail(outs, path_ + ".outputs", "must be a list of value names");
      for (size_t i = 0; i < outs.size(); ++i)
        g_.mark_output(value(outs[i], path_ + ".outputs[" + std::to_string(i) + "]"));
    }
    if (const YAML::Node loss = section["loss"]) g_.set_loss(value(loss, path_ + ".loss"));
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const YAML::Node& at, const std::string& path,
                         const std::string& message) const {
    const int line = at.IsDefined() ? at.Mark().line : -1;
    throw_input(source_ + (line >= 0 ? ":" + std::to_string(line + 1) : "") + ": " + path + ": " +
                message);
  }

  void read_inputs(const YAML::Node& inputs) {
    const std::string path = path_ + ".inputs";
    if (!inputs || !inputs.IsSequence() || inputs.size() == 0)
      fail(inputs, path, "must be a non-empty list of {name, shape[, layout][, integer]}");
    for (size_t i = 0; i < inputs.size(); ++i) {
      const YAML::Node in = inputs[i];
      const std::string p = path + "[" + std::to_string(i) + "]";
      if (!in.IsMap() || !in["name"] || !in["shape"])
        fail(in, p, "needs name and shape (per sample, channels first)");
      for (const auto& kv : in) {
        const auto k = kv.first.as<std::string>();
        if (k != "name" && k != "shape" && k != "layout" && k != "integer")
          fail(kv.first, p + "." + k, "unknown key (an input has name, shape, layout, integer)");
      }
      const AttrValue shape = scalar_or_list(in["shape"], AttrType::integers, p + ".shape");
      Layout layout = Layout::plain;
      if (const YAML::Node l = in["layout"]) {
        const auto text = l.as<std::string>();
        if (text == "channels_last")
          layout = Layout::channels_last;
        else if (text != "plain")
          fail(l, p + ".layout", "must be plain or channels_last, got '" + text + "'");
      }
      bool integer = false;
      if (const YAML::Node b = in["integer"])
        integer = std::get<bool>(scalar_or_list(b, AttrType::boolean, p + ".integer"));
      const auto& dims = std::get<std::vector<int64_t>>(shape);
      // [] is one number per sample (a class label).
      if (dims.size() >= static_cast<size_t>(Shape::kMaxRank))
        fail(in["shape"], p + ".shape", "must have 0 to 7 dimensions (the batch comes on top)");
      for (int64_t d : dims)
        if (d < 1) fail(in["shape"], p + ".shape", "every dimension must be >= 1");
      try {
        g_.input(in["name"].as<std::string>(), Shape(dims), layout, integer);
      } catch (const Error& e) {
        fail(in, p, e.what());
      }
    }
  }

  void read_layer(const YAML::Node& node, size_t i) {
    std::string p = path_ + ".layers[" + std::to_string(i) + "]";
    if (!node.IsMap() || !node["name"] || !node["kind"])
      fail(node, p, "a layer needs a name and a kind");
    const auto name = node["name"].as<std::string>();
    p += " (" + name + ")";
    const auto kind_name = node["kind"].as<std::string>();
    const LayerKind* kind = nullptr;
    try {
      kind = &find_layer_kind(kind_name);
    } catch (const Error& e) {
      fail(node["kind"], p + ".kind", e.what());
    }
    LayerSpec spec{kind_name, {}};
    std::vector<ValueId> inputs;
    for (const auto& kv : node) {
      const auto key = kv.first.as<std::string>();
      if (key == "name" || key == "kind") continue;
      if (key == "inputs") {
        if (!kv.second.IsSequence()) fail(kv.second, p + ".inputs", "must be a list of names");
        for (size_t j = 0; j < kv.second.size(); ++j)
          inputs.push_back(value(kv.second[j], p + ".inputs[" + std::to_string(j) + "]"));
        continue;
      }
      const AttrKey* k = nullptr;
      for (const auto& candidate : kind->keys)
        if (candidate.key == key) k = &candidate;
      if (!k) {
        std::string known = "inputs";
        for (const auto& c : kind->keys) known += ", " + c.key;
        fail(kv.first, p,
             "unknown attribute '" + key + "' (" + kind_name + " accepts: " + known + ")");
      }
      spec.attrs.set(key, scalar_or_list(kv.second, k->type, p + "." + key));
    }
    if (!node["inputs"]) {
      if (g_.nodes().empty() && g_.inputs().empty()) fail(node, p, "no value to read: add inputs");
      inputs = {g_.nodes().empty() ? g_.input_value(0) : g_.nodes().back().outputs.at(0)};
    }
    try {
      g_.add(name, spec, inputs);
    } catch (const Error& e) {
      fail(node, p, e.what());
    }
  }

  // A graph input's name, a layer's name, or "layer:i" for output i of a layer.
  ValueId value(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) fail(n, path, "must be the name of an input or a layer");
    std::string name = n.as<std::string>();
    int output = 0;
    if (const auto colon = name.rfind(':'); colon != std::string::npos) {
      output = std::atoi(name.c_str() + colon + 1);
      name.resize(colon);
    }
    for (size_t i = 0; i < g_.inputs().size(); ++i)
      if (g_.inputs()[i].name == name) return g_.input_value(i);
    for (const auto& node : g_.nodes())
      if (node.name == name) {
        if (output < 0 || static_cast<size_t>(output) >= node.outputs.size())
          fail(n, path, "layer '" + name + "' has no output " + std::to_string(output));
        return node.outputs[static_cast<size_t>(output)];
      }
    fail(n, path, "no input or earlier layer is named '" + name + "'");
  }

  AttrValue scalar_or_list(const YAML::Node& n, AttrType type, const std::string& path) const {
    const bool list = type == AttrType::integers || type == AttrType::numbers;
    if (list != n.IsSequence() || (!list && !n.IsScalar()))
      fail(n, path,
           "must be " + std::string(type == AttrType::integer ? "an " : "a ") +
               attr_type_name(type));
    try {
      switch (type) {
        case AttrType::boolean:
          return n.as<bool>();
        case AttrType::integer:
          return n.as<int64_t>();
        case AttrType::number:
          return n.as<double>();
        case AttrType::text:
          return n.as<std::string>();
        case AttrType::integers:
          return n.as<std::vector<int64_t>>();
        case AttrType::numbers:
          return n.as<std::vector<double>>();
      }
    } catch (const YAML::Exception&) {
    }
    fail(n, path,
         "must be " + std::string(type == AttrType::integer ? "an " : "a ") + attr_type_name(type));
  }

  std::string source_, path_;
  Graph g_;
};

// Flow-style text of a value name list.
std::string names(const Graph& g, const std::vector<ValueId>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + g.value_name(values[i]);
  return s + "]";
}

}  // namespace

bool is_graph_yaml_key(const std::string& key) {
  return key == "inputs" || key == "layers" || key == "outputs" || key == "loss";
}

Graph graph_from_yaml(const YAML::Node& section, const std::string& source,
                      const std::string& path) {
  if (!section || !section.IsMap()) throw_input(source + ": " + path + ": must be a mapping");
  return GraphReader(source, path).read(section);
}

std::string graph_to_yaml(const Graph& g) {
  std::ostringstream os;
  os << "inputs:\n";
  for (const auto& in : g.inputs()) {
    os << "  - {name: " << in.name << ", shape: " << attr_text(in.per_sample.to_vector())
       << ", layout: " << layout_name(in.layout);
    if (in.integer) os << ", integer: true";
    os << "}\n";
  }
  os << "layers:\n";
  for (const auto& node : g.nodes()) {
    os << "  - {name: " << node.name << ", kind: " << node.layer.kind
       << ", inputs: " << names(g, node.inputs);
    for (const auto& [key, value] : node.layer.attrs.items())
      os << ", " << key << ": " << attr_text(value);
    os << "}\n";
  }
  if (!g.outputs().empty()) os << "outputs: " << names(g, g.outputs()) << "\n";
  if (g.loss() >= 0) os << "loss: " << g.value_name(g.loss()) << "\n";
  return os.str();
}

}  // namespace crest

// Machine descriptions (docs/scaling.md, "The machine file"): YAML in, YAML out.
#include "crest/plan/machine.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"

namespace crest {

Link Machine::node_link() const {
  return measured_allreduce ? measured_allreduce->link : intra_node;
}

namespace {

// Located reads of one machine file: every error says file:line: key: what is wrong.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& key,
                         const std::string& message) const {
    const int line = at.Mark().line;
    throw_input(file_ + (line >= 0 ? ":" + std::to_string(line + 1) : "") + ": " + key + ": " +
                message);
  }

  // A mapping whose keys are all in `known` (a typo is refused, not ignored).
  void check_keys(const YAML::Node& map, const std::string& path,
                  const std::set<std::string>& known) const {
    if (!map.IsMap()) fail(map, path.empty() ? "(top level)" : path, "expected a mapping");
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      if (!known.count(key)) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        fail(kv.first, join(path, key), "unknown key (expected one of: " + list + ")");
      }
    }
  }

  double number(const YAML::Node& v, const std::string& key, double min, double max) const {
    double d = 0;
    if (!v.IsScalar() || !YAML::convert<double>::decode(v, d) || !std::isfinite(d))
      fail(v, key, "expected a number, got '" + text(v) + "'");
    if (d < min || d > max)
      fail(v, key,
           "must be between " + short_number(min) + " and " + short_number(max) + ", got " +
               short_number(d));
    return d;
  }

  int integer(const YAML::Node& v, const std::string& key, int min, int max) const {
    const double d = number(v, key, min, max);
    if (d != std::floor(d)) fail(v, key, "expected an integer, got " + text(v));
    return static_cast<int>(d);
  }

  std::string string(const YAML::Node& v, const std::string& key) const {
    if (!v.IsScalar()) fail(v, key, "expected a string");
    return v.Scalar();
  }

  static std::string join(const std::string& a, const std::string& b) {
    return a.empty() ? b : a + "." + b;
  }

 private:
  static std::string text(const YAML::Node& v) {
    if (v.IsScalar()) return v.Scalar();
    YAML::Emitter e;
    e << YAML::Flow << v;
    return e.c_str();
  }
  static std::string short_number(double d) {
    std::ostringstream os;
    os << d;
    return os.str();
  }
  std::string file_;
};

constexpr double kHuge = 1e15;

Link read_link(const Reader& r, const YAML::Node& n, const std::string& path) {
  r.check_keys(n, path, {"gb_s", "latency_us"});
  Link l;
  if (!n["gb_s"]) r.fail(n, path + ".gb_s", "missing (the link's bandwidth, GB/s)");
  l.gb_s = r.number(n["gb_s"], path + ".gb_s", 1e-9, kHuge);
  if (n["latency_us"]) l.latency_us = r.number(n["latency_us"], path + ".latency_us", 0, 1e9);
  return l;
}

MeasuredTraining read_training(const Reader& r, const YAML::Node& n, const std::string& path) {
  r.check_keys(n, path,
               {"model", "backend", "precision", "spatial", "threads", "node_ranks", "batch",
                "step_s", "update_s", "trainable_bytes", "layers"});
  MeasuredTraining t;
  t.model = r.string(n["model"], path + ".model");
  t.backend = r.string(n["backend"], path + ".backend");
  t.precision = r.string(n["precision"], path + ".precision");
  if (const YAML::Node sp = n["spatial"]) {
    if (!sp.IsSequence()) r.fail(sp, path + ".spatial", "expected a list of parts per axis");
    for (size_t i = 0; i < sp.size(); ++i)
      t.spatial.push_back(
          r.integer(sp[i], path + ".spatial[" + std::to_string(i) + "]", 1, 1 << 20));
  }
  t.threads = r.integer(n["threads"], path + ".threads", 1, 1 << 16);
  if (n["node_ranks"]) t.node_ranks = r.integer(n["node_ranks"], path + ".node_ranks", 1, 1 << 16);
  t.batch = r.integer(n["batch"], path + ".batch", 1, 1 << 30);
  t.step_s = r.number(n["step_s"], path + ".step_s", 0, kHuge);
  t.update_s = r.number(n["update_s"], path + ".update_s", 0, kHuge);
  t.trainable_bytes =
      static_cast<size_t>(r.number(n["trainable_bytes"], path + ".trainable_bytes", 0, kHuge));
  const YAML::Node layers = n["layers"];
  if (!layers.IsSequence()) r.fail(n, path + ".layers", "expected a list of layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string at = path + ".layers[" + std::to_string(i) + "]";
    const YAML::Node l = layers[i];
    r.check_keys(l, at, {"name", "forward_s", "backward_s", "forward_flops"});
    t.layers.push_back({r.string(l["name"], at + ".name"),
                        r.number(l["forward_s"], at + ".forward_s", 0, kHuge),
                        r.number(l["backward_s"], at + ".backward_s", 0, kHuge),
                        r.number(l["forward_flops"], at + ".forward_flops", 0, 1e30)});
  }
  return t;
}

MeasuredLoader read_loader(const Reader& r, const YAML::Node& n, const std::string& path) {
  r.check_keys(n, path,
               {"format", "sample_shape", "threads", "samples_per_s", "payload_bytes_per_sample"});
  MeasuredLoader l;
  l.format = r.string(n["format"], path + ".format");
  const YAML::Node shape = n["sample_shape"];
  if (!shape.IsSequence() || shape.size() == 0)
    r.fail(n, path + ".sample_shape", "expected the sample's extents, channels last");
  for (size_t i = 0; i < shape.size(); ++i)
    l.sample_shape.push_back(
        r.integer(shape[i], path + ".sample_shape[" + std::to_string(i) + "]", 1, 1 << 30));
  l.threads = r.integer(n["threads"], path + ".threads", 1, 1 << 16);
  l.samples_per_s = r.number(n["samples_per_s"], path + ".samples_per_s", 1e-9, kHuge);
  l.payload_bytes_per_sample =
      r.number(n["payload_bytes_per_sample"], path + ".payload_bytes_per_sample", 0, kHuge);
  return l;
}

void read_measured(const Reader& r, const YAML::Node& n, Machine& m) {
  r.check_keys(n, "", {"training", "allreduce", "loader"});
  if (const YAML::Node l = n["loader"]) {
    if (!l.IsSequence()) r.fail(l, "loader", "expected a list");
    for (size_t i = 0; i < l.size(); ++i)
      m.measured_loader.push_back(read_loader(r, l[i], "loader[" + std::to_string(i) + "]"));
  }
  if (const YAML::Node a = n["allreduce"]) {
    r.check_keys(a, "allreduce", {"ranks", "sizes", "gb_s", "latency_us"});
    MeasuredAllreduce ar;
    ar.ranks = r.integer(a["ranks"], "allreduce.ranks", 2, 1 << 20);
    ar.sizes = r.integer(a["sizes"], "allreduce.sizes", 2, 1 << 20);
    ar.link.gb_s = r.number(a["gb_s"], "allreduce.gb_s", 1e-9, kHuge);
    ar.link.latency_us = r.number(a["latency_us"], "allreduce.latency_us", 0, 1e9);
    m.measured_allreduce = ar;
  }
  if (const YAML::Node t = n["training"]) {
    if (!t.IsSequence()) r.fail(t, "training", "expected a list");
    for (size_t i = 0; i < t.size(); ++i)
      m.measured_training.push_back(read_training(r, t[i], "training[" + std::to_string(i) + "]"));
  }
}

void read_top(const Reader& r, const YAML::Node& root, Machine& m) {
  r.check_keys(root, "",
               {"name", "nodes", "ranks_per_node", "cores_per_node", "memory_gb_per_rank",
                "compute", "network", "storage"});
  if (!root["name"]) r.fail(root, "name", "missing (the machine's name)");
  m.name = r.string(root["name"], "name");
  if (root["nodes"]) m.nodes = r.integer(root["nodes"], "nodes", 1, 1 << 24);
  if (!root["ranks_per_node"])
    r.fail(root, "ranks_per_node", "missing (how many ranks a node runs at most)");
  m.ranks_per_node = r.integer(root["ranks_per_node"], "ranks_per_node", 1, 1 << 16);
  if (root["cores_per_node"])
    m.cores_per_node = r.integer(root["cores_per_node"], "cores_per_node", 1, 1 << 20);
  if (root["memory_gb_per_rank"])
    m.memory_gb_per_rank = r.number(root["memory_gb_per_rank"], "memory_gb_per_rank", 1e-6, kHuge);
  if (const YAML::Node c = root["compute"]) {
    r.check_keys(c, "compute", {"gflops_per_rank", "gflops_per_core", "step_jitter"});
    if (c["gflops_per_rank"] && c["gflops_per_core"])
      r.fail(c, "compute", "give gflops_per_rank (a device per rank) or gflops_per_core, not both");
    if (c["gflops_per_rank"])
      m.gflops_per_rank = r.number(c["gflops_per_rank"], "compute.gflops_per_rank", 1e-6, kHuge);
    if (c["gflops_per_core"]) {
      m.gflops_per_core = r.number(c["gflops_per_core"], "compute.gflops_per_core", 1e-6, kHuge);
      if (m.cores_per_node == 0)
        r.fail(c["gflops_per_core"], "compute.gflops_per_core",
               "needs cores_per_node (how many cores a node's ranks share)");
    }
    if (c["step_jitter"]) m.step_jitter = r.number(c["step_jitter"], "compute.step_jitter", 0, 1);
  }
  const YAML::Node net = root["network"];
  if (!net) r.fail(root, "network", "missing (intra_node and, for several nodes, inter_node)");
  r.check_keys(net, "network", {"intra_node", "inter_node"});
  if (!net["intra_node"]) r.fail(net, "network.intra_node", "missing");
  m.intra_node = read_link(r, net["intra_node"], "network.intra_node");
  if (net["inter_node"])
    m.inter_node = read_link(r, net["inter_node"], "network.inter_node");
  else if (m.nodes > 1)
    r.fail(net, "network.inter_node",
           "missing (the machine has " + std::to_string(m.nodes) + " nodes)");
  if (const YAML::Node s = root["storage"]) {
    r.check_keys(s, "storage", {"shared_fs_gb_s", "node_local_gb_s"});
    if (s["shared_fs_gb_s"])
      m.shared_fs_gb_s = r.number(s["shared_fs_gb_s"], "storage.shared_fs_gb_s", 1e-9, kHuge);
    if (s["node_local_gb_s"])
      m.node_local_gb_s = r.number(s["node_local_gb_s"], "storage.node_local_gb_s", 1e-9, kHuge);
  }
}

void emit_link(YAML::Emitter& e, const Link& l) {
  e << YAML::Flow << YAML::BeginMap << YAML::Key << "gb_s" << YAML::Value << l.gb_s << YAML::Key
    << "latency_us" << YAML::Value << l.latency_us << YAML::EndMap;
}

void emit_measured(YAML::Emitter& e, const Machine& m) {
  e << YAML::BeginMap;
  if (const auto& a = m.measured_allreduce) {
    e << YAML::Key << "allreduce" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
      << "ranks" << YAML::Value << a->ranks << YAML::Key << "sizes" << YAML::Value << a->sizes
      << YAML::Key << "gb_s" << YAML::Value << a->link.gb_s << YAML::Key << "latency_us"
      << YAML::Value << a->link.latency_us << YAML::EndMap;
  }
  if (!m.measured_training.empty()) {
    e << YAML::Key << "training" << YAML::Value << YAML::BeginSeq;
    for (const MeasuredTraining& t : m.measured_training) {
      e << YAML::BeginMap << YAML::Key << "model" << YAML::Value << t.model << YAML::Key
        << "backend" << YAML::Value << t.backend << YAML::Key << "precision" << YAML::Value
        << t.precision;
      if (!t.spatial.empty()) e << YAML::Key << "spatial" << YAML::Value << YAML::Flow << t.spatial;
      e << YAML::Key << "threads" << YAML::Value << t.threads;
      if (t.node_ranks != 1) e << YAML::Key << "node_ranks" << YAML::Value << t.node_ranks;
      e << YAML::Key << "batch" << YAML::Value << t.batch << YAML::Key << "step_s" << YAML::Value
        << t.step_s << YAML::Key << "update_s" << YAML::Value << t.update_s << YAML::Key
        << "trainable_bytes" << YAML::Value << t.trainable_bytes << YAML::Key << "layers"
        << YAML::Value << YAML::BeginSeq;
      for (const MeasuredLayer& l : t.layers)
        e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << l.name
          << YAML::Key << "forward_s" << YAML::Value << l.forward_s << YAML::Key << "backward_s"
          << YAML::Value << l.backward_s << YAML::Key << "forward_flops" << YAML::Value
          << l.forward_flops << YAML::EndMap;
      e << YAML::EndSeq << YAML::EndMap;
    }
    e << YAML::EndSeq;
  }
  if (!m.measured_loader.empty()) {
    e << YAML::Key << "loader" << YAML::Value << YAML::BeginSeq;
    for (const MeasuredLoader& l : m.measured_loader)
      e << YAML::Flow << YAML::BeginMap << YAML::Key << "format" << YAML::Value << l.format
        << YAML::Key << "sample_shape" << YAML::Value << YAML::Flow << l.sample_shape << YAML::Key
        << "threads" << YAML::Value << l.threads << YAML::Key << "samples_per_s" << YAML::Value
        << l.samples_per_s << YAML::Key << "payload_bytes_per_sample" << YAML::Value
        << l.payload_bytes_per_sample << YAML::EndMap;
    e << YAML::EndSeq;
  }
  e << YAML::EndMap;
}

// Parses `path` and hands its root to `read`, turning yaml-cpp's own exceptions into located
// input errors.
template <typename Read>
void read_yaml_file(const std::string& path, const std::string& what, Read read) {
  std::ifstream in(path);
  if (!in) throw_input(path + ": cannot open the " + what);
  std::stringstream text;
  text << in.rdbuf();
  try {
    const YAML::Node root = YAML::Load(text.str());
    read(Reader(path), root);
  } catch (const YAML::Exception& e) {  // syntax, or a scalar where a mapping was expected
    throw_input(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

}  // namespace

std::string measured_path(const std::string& machine_file) {
  const std::string ext = ".yaml";
  const bool yaml = machine_file.size() > ext.size() &&
                    machine_file.compare(machine_file.size() - ext.size(), ext.size(), ext) == 0;
  return (yaml ? machine_file.substr(0, machine_file.size() - ext.size()) : machine_file) +
         ".measured.yaml";
}

Machine load_machine(const std::string& path) {
  Machine m;
  m.file = path;
  read_yaml_file(path, "machine file",
                 [&](const Reader& r, const YAML::Node& root) { read_top(r, root, m); });
  const std::string measured = measured_path(path);
  if (std::ifstream(measured).good())
    read_yaml_file(measured, "measurements file",
                   [&](const Reader& r, const YAML::Node& root) { read_measured(r, root, m); });
  return m;
}

std::string machine_yaml(const Machine& m) {
  YAML::Emitter e;
  e.SetDoublePrecision(std::numeric_limits<double>::max_digits10);
  e << YAML::BeginMap << YAML::Key << "name" << YAML::Value << m.name;
  e << YAML::Key << "nodes" << YAML::Value << m.nodes;
  e << YAML::Key << "ranks_per_node" << YAML::Value << m.ranks_per_node;
  if (m.cores_per_node > 0) e << YAML::Key << "cores_per_node" << YAML::Value << m.cores_per_node;
  if (m.memory_gb_per_rank > 0)
    e << YAML::Key << "memory_gb_per_rank" << YAML::Value << m.memory_gb_per_rank;
  if (m.gflops_per_rank > 0 || m.gflops_per_core > 0 || m.step_jitter > 0) {
    e << YAML::Key << "compute" << YAML::Value << YAML::BeginMap;
    if (m.gflops_per_rank > 0)
      e << YAML::Key << "gflops_per_rank" << YAML::Value << m.gflops_per_rank;
    if (m.gflops_per_core > 0)
      e << YAML::Key << "gflops_per_core" << YAML::Value << m.gflops_per_core;
    if (m.step_jitter > 0) e << YAML::Key << "step_jitter" << YAML::Value << m.step_jitter;
    e << YAML::EndMap;
  }
  e << YAML::Key << "network" << YAML::Value << YAML::BeginMap << YAML::Key << "intra_node"
    << YAML::Value;
  emit_link(e, m.intra_node);
  if (m.inter_node.gb_s > 0) {
    e << YAML::Key << "inter_node" << YAML::Value;
    emit_link(e, m.inter_node);
  }
  e << YAML::EndMap;
  if (m.shared_fs_gb_s > 0 || m.node_local_gb_s > 0) {
    e << YAML::Key << "storage" << YAML::Value << YAML::BeginMap;
    if (m.shared_fs_gb_s > 0) e << YAML::Key << "shared_fs_gb_s" << YAML::Value << m.shared_fs_gb_s;
    if (m.node_local_gb_s > 0)
      e << YAML::Key << "node_local_gb_s" << YAML::Value << m.node_local_gb_s;
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

std::string measured_yaml(const Machine& m) {
  YAML::Emitter e;
  e.SetDoublePrecision(std::numeric_limits<double>::max_digits10);
  emit_measured(e, m);
  return std::string(e.c_str()) + "\n";
}

void save_measured(const Machine& m) {
  CREST_CHECK(!m.file.empty(), "a machine read from a file");
  write_file_atomically(measured_path(m.file), measured_yaml(m));
}

}  // namespace crest

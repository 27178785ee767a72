#include "crest/graph/pipeline_cut.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "crest/core/error.hpp"

namespace crest {
namespace {

// Position of the node named `name`, or throws naming `what`.
size_t node_position(const Graph& g, const std::string& name, const std::string& what) {
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return i;
  throw_input(what + ": the model has no layer named '" + name + "'");
}

// Per value, the node that makes it (-1 for graph inputs).
std::vector<int> producers(const Graph& g) {
  std::vector<int> made_by(static_cast<size_t>(g.value_count()), -1);
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (ValueId v : g.nodes()[i].outputs) made_by[static_cast<size_t>(v)] = static_cast<int>(i);
  return made_by;
}

// Values a node makes before position `cut` and a node at or after it reads, in value order.
std::vector<ValueId> crossing(const Graph& g, const std::vector<int>& made_by, size_t cut) {
  std::vector<bool> crosses(made_by.size(), false);
  for (size_t i = cut; i < g.nodes().size(); ++i)
    for (ValueId v : g.nodes()[i].inputs) {
      const int p = made_by[static_cast<size_t>(v)];
      if (p >= 0 && static_cast<size_t>(p) < cut) crosses[static_cast<size_t>(v)] = true;
    }
  std::vector<ValueId> out;
  for (size_t v = 0; v < crosses.size(); ++v)
    if (crosses[v]) out.push_back(static_cast<ValueId>(v));
  return out;
}

// The per-sample shape of every value: the whole graph's shapes are not stored, so a stage's
// received input takes its shape from the value's producer through the layer registry.
std::vector<Shape> per_sample_shapes(const Graph& g) {
  std::vector<Shape> shape(static_cast<size_t>(g.value_count()));
  for (size_t i = 0; i < g.inputs().size(); ++i) shape[i] = g.inputs()[i].per_sample;
  for (const GraphNode& n : g.nodes()) {
    std::vector<Shape> in;
    for (ValueId v : n.inputs) in.push_back(shape[static_cast<size_t>(v)].with_batch(1));
    const auto layer = find_layer_kind(n.layer.kind).make(n.layer.attrs);
    const std::vector<Shape> out = layer->infer_shapes(in);
    for (size_t j = 0; j < n.outputs.size() && j < out.size(); ++j)
      shape[static_cast<size_t>(n.outputs[j])] = out[j].without_batch();
  }
  return shape;
}

struct StageBuilder {
  const Graph& whole;
  const std::vector<Shape>& shapes;
  PipelineStageGraph stage;
  std::map<ValueId, ValueId> local;  // whole graph's value -> the stage graph's
  std::vector<ValueId> gradients;    // per sent value: the input its gradient arrives in

  // Graph inputs come before any node: the whole graph's, the received values, and the sent
  // values' gradients.
  void declare_inputs(size_t begin, size_t end, const std::vector<ValueId>& received,
                      const std::vector<ValueId>& sent) {
    std::vector<bool> reads(whole.inputs().size(), false);
    for (size_t i = begin; i < end; ++i)
      for (ValueId v : whole.nodes()[i].inputs)
        if (static_cast<size_t>(v) < reads.size()) reads[static_cast<size_t>(v)] = true;
    for (size_t i = 0; i < reads.size(); ++i) {
      if (!reads[i]) continue;
      const GraphInput& in = whole.inputs()[i];
      local[static_cast<ValueId>(i)] =
          stage.graph.input(in.name, in.per_sample, in.layout, in.integer);
      stage.data_inputs.push_back(in.name);
    }
    for (ValueId v : received) {
      const std::string name = whole.value_name(v);
      local[v] = stage.graph.input(name, shapes[static_cast<size_t>(v)]);
      stage.received.push_back(name);
    }
    for (ValueId v : sent)
      gradients.push_back(stage.graph.input(upstream_gradient_input(whole.value_name(v)),
                                            shapes[static_cast<size_t>(v)]));
  }

  void copy_nodes(size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const GraphNode& n = whole.nodes()[i];
      std::vector<ValueId> inputs;
      for (ValueId v : n.inputs) inputs.push_back(local.at(v));
      stage.graph.add(n.name, n.layer, inputs, static_cast<int>(n.outputs.size()));
      const GraphNode& copy = stage.graph.nodes().back();
      for (size_t j = 0; j < n.outputs.size(); ++j) local[n.outputs[j]] = copy.outputs[j];
    }
  }

  // A stage before the last: its sent values are outputs, and backward starts from their
  // received gradients.
  void end_in_upstream_gradient(const std::vector<ValueId>& sent) {
    std::vector<ValueId> pairs;
    for (size_t i = 0; i < sent.size(); ++i) {
      stage.sent.push_back(whole.value_name(sent[i]));
      pairs.push_back(local.at(sent[i]));
      pairs.push_back(gradients[i]);
      stage.graph.mark_output(local.at(sent[i]));
    }
    stage.graph.set_loss(stage.graph.add("upstream_gradient", {"upstream_gradient", {}}, pairs));
  }

  void keep_loss_and_outputs() {
    for (ValueId v : whole.outputs())
      if (local.count(v) && !local_is_input(v)) stage.graph.mark_output(local.at(v));
    stage.graph.set_loss(local.at(whole.loss()));
  }

  bool local_is_input(ValueId v) const {
    return static_cast<size_t>(local.at(v)) < stage.graph.inputs().size();
  }
};

}  // namespace

std::string upstream_gradient_input(const std::string& sent) { return sent + ".gradient"; }

std::vector<PipelineStageGraph> cut_into_stages(const Graph& whole,
                                                const std::vector<std::string>& stage_starts,
                                                const std::string& what) {
  if (whole.loss() < 0) throw_input(what + ": a pipeline needs a model with a loss");
  const std::vector<int> made_by = producers(whole);
  std::vector<size_t> cuts{0};
  for (const std::string& name : stage_starts) {
    const size_t at = node_position(whole, name, what);
    if (at <= cuts.back())
      throw_input(what + ": stage " + std::to_string(cuts.size()) + " starts at layer '" + name +
                  "', which is not after the previous stage's first layer");
    cuts.push_back(at);
  }
  const size_t n = whole.nodes().size();
  const int loss_node = made_by[static_cast<size_t>(whole.loss())];
  if (loss_node < 0 || static_cast<size_t>(loss_node) < cuts.back())
    throw_input(what + ": the loss layer '" + whole.value_name(whole.loss()) +
                "' must be in the last stage, which starts at layer '" +
                whole.nodes()[cuts.back()].name + "'");
  cuts.push_back(n);

  const std::vector<Shape> shapes = per_sample_shapes(whole);
  std::vector<PipelineStageGraph> stages;
  std::vector<ValueId> received;
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    StageBuilder b{whole, shapes, {}, {}, {}};
    b.stage.first_node = cuts[s];
    b.stage.first_node_name = whole.nodes()[cuts[s]].name;
    b.stage.last_node_name = whole.nodes()[cuts[s + 1] - 1].name;
    const bool last = s + 2 == cuts.size();
    std::vector<ValueId> sent =
        last ? std::vector<ValueId>{} : crossing(whole, made_by, cuts[s + 1]);
    b.declare_inputs(cuts[s], cuts[s + 1], received, sent);
    b.copy_nodes(cuts[s], cuts[s + 1]);
    if (last)
      b.keep_loss_and_outputs();
    else
      b.end_in_upstream_gradient(sent);
    stages.push_back(std::move(b.stage));
    received = std::move(sent);
  }
  return stages;
}

std::vector<size_t> balanced_stage_starts(const std::vector<double>& node_costs, int stages) {
  const size_t n = node_costs.size();
  const auto k = static_cast<size_t>(stages);
  if (stages < 1 || k > n)
    throw_usage("cannot cut " + std::to_string(n) + " layers into " + std::to_string(stages) +
                " pipeline stages");
  std::vector<double> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + node_costs[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[j][i]: the cheapest largest stage over the first i nodes in j stages; from[j][i]: where
  // its last stage starts.
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<size_t>> from(k + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t j = 1; j <= k; ++j)
    for (size_t i = j; i <= n; ++i)
      for (size_t c = j - 1; c < i; ++c) {
        const double worst = std::max(best[j - 1][c], prefix[i] - prefix[c]);
        if (worst < best[j][i]) {
          best[j][i] = worst;
          from[j][i] = c;
        }
      }
  std::vector<size_t> starts(k - 1);
  size_t end = n;
  for (size_t j = k; j > 1; --j) {
    end = from[j][end];
    starts[j - 2] = end;
  }
  return starts;
}

std::vector<double> costs_scaled_to_stages(const std::vector<double>& node_costs,
                                           const std::vector<size_t>& starts,
                                           const std::vector<double>& stage_s) {
  if (stage_s.size() != starts.size() + 1)
    throw_usage("rescaling a pipeline's costs: " + std::to_string(stage_s.size()) +
                " measured stage times for " + std::to_string(starts.size() + 1) + " stages");
  std::vector<size_t> bounds{0};
  bounds.insert(bounds.end(), starts.begin(), starts.end());
  bounds.push_back(node_costs.size());
  std::vector<double> scaled = node_costs;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    if (bounds[s] > bounds[s + 1])
      throw_usage("rescaling a pipeline's costs: the stages' starts are not in order");
    double predicted = 0;
    for (size_t i = bounds[s]; i < bounds[s + 1]; ++i) predicted += node_costs[i];
    if (predicted <= 0 || stage_s[s] <= 0) continue;
    for (size_t i = bounds[s]; i < bounds[s + 1]; ++i) scaled[i] *= stage_s[s] / predicted;
  }
  return scaled;
}

}  // namespace crest

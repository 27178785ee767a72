// Shapes, parameters and gradient needs. A value needs a gradient iff it is downstream of a
// trainable parameter (or of a graph input when input_grads is set) and upstream of the loss,
// so the first convolution's input gradient is never computed.

#include <algorithm>

#include "compile/program.hpp"
#include "crest/core/error.hpp"

namespace crest::compile {
namespace {

void add_graph_inputs(Program& p, const Graph& g) {
  for (int v = 0; v < g.value_count(); ++v) p.values.push_back(std::make_unique<Value>());
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const GraphInput& in = p.inputs[i];
    Value& v = p.val(static_cast<int>(i));
    v.name = in.name;
    v.shape = in.per_sample.with_batch(p.opts.batch);
    v.fmt = plain_format(v.shape, in.integer ? DType::i32 : p.opts.dtype, in.layout);
    v.pinned = true;
    v.graph_input = static_cast<int>(i);
    const auto& named = p.opts.grad_inputs;
    const bool asked =
        p.opts.input_grads || std::find(named.begin(), named.end(), in.name) != named.end();
    v.needs_grad = p.opts.training && asked && !in.integer;
  }
}

// Only values upstream of the loss get gradients.
void keep_gradients_that_reach_the_loss(Program& p, const Graph& g) {
  if (g.loss() < 0) {
    for (auto& v : p.values) v->needs_grad = false;
    return;
  }
  std::vector<bool> reaches(p.values.size(), false);
  reaches[static_cast<size_t>(g.loss())] = true;
  for (size_t k = p.nodes.size(); k-- > 0;) {  // consumers before producers
    const Node& node = p.nodes[k];
    bool any = false;
    for (ValueId o : node.outputs) any = any || reaches[static_cast<size_t>(o)];
    if (!any) continue;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (!node.layer->input_is_constant(i)) reaches[static_cast<size_t>(node.inputs[i])] = true;
  }
  for (size_t v = 0; v < p.values.size(); ++v)
    p.values[v]->needs_grad = p.values[v]->needs_grad && reaches[v];
}

}  // namespace

void infer_shapes(Program& p, const Graph& g) {
  add_graph_inputs(p, g);
  for (Node& node : p.nodes) {
    std::vector<Shape> in_shapes;
    for (ValueId v : node.inputs) in_shapes.push_back(p.val(v).shape);
    std::vector<Shape> out_shapes;
    try {
      out_shapes = node.layer->infer_shapes(in_shapes);
    } catch (const Error& e) {
      rethrow_for_node(e, node.name, node.layer->kind());
    }
    if (out_shapes.size() != node.outputs.size())
      throw_runtime("layer '" + node.name + "' produced " + std::to_string(out_shapes.size()) +
                    " shapes for " + std::to_string(node.outputs.size()) + " outputs");
    node.param_specs = node.layer->param_specs(in_shapes);
    bool has_trainable = false;
    for (const ParamSpec& spec : node.param_specs) has_trainable = has_trainable || spec.trainable;
    bool grad = p.opts.training && has_trainable;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      grad = grad || (p.val(node.inputs[i]).needs_grad && !node.layer->input_is_constant(i));
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      Value& o = p.val(node.outputs[j]);
      o.name = node.name;
      if (node.outputs.size() > 1) o.name.append(":").append(std::to_string(j));
      o.shape = out_shapes[j];
      o.needs_grad = grad;
    }
  }
  keep_gradients_that_reach_the_loss(p, g);
}

namespace {

// CompileOptions::shared_params: the owner's buffers, once its layout is checked to be this
// program's (the same graph compiled alike lays its parameters out alike).
void share_params(Program& p, const ParamStore& owner) {
  const auto& mine = p.params.slots();
  const auto& theirs = owner.slots();
  bool same = mine.size() == theirs.size() && p.params.dtype() == owner.dtype() &&
              p.params.bytes() == owner.bytes() && owner.allocated() &&
              owner.has_gradients() == (p.opts.allocate || p.opts.param_gradients);
  for (size_t i = 0; same && i < mine.size(); ++i)
    same = mine[i].name == theirs[i].name && mine[i].offset == theirs[i].offset &&
           mine[i].count == theirs[i].count;
  if (!same)
    throw_usage("CompileOptions::shared_params: the parameters given are not this program's");
  p.params = ParamStore::sharing_buffers_of(owner, p.backend);
}

}  // namespace

void store_params(Program& p) {
  std::vector<ParamSlot> slots;
  for (Node& node : p.nodes)
    for (const ParamSpec& spec : node.param_specs) {
      node.param_slots.push_back(static_cast<int>(slots.size()));
      slots.push_back({node.name + "." + spec.name, spec.shape, 0, 0, spec});
    }
  const bool buffers = (p.opts.allocate || p.opts.allocate_params) && !p.opts.shared_params;
  p.params = ParamStore(slots, p.opts.dtype, p.backend, buffers,
                        p.opts.allocate || p.opts.param_gradients);
  if (p.opts.shared_params) share_params(p, *p.opts.shared_params);
  // ParamStore orders slots trainable first: map the nodes' indices to the store's.
  for (Node& node : p.nodes)
    for (int& s : node.param_slots) s = p.params.find(slots[static_cast<size_t>(s)].name);
  if (buffers) p.params.initialize(p.opts.seed);
}

}  // namespace crest::compile

// Kernels and layouts, written once for every layer: layers create their kernels in execution
// order and may ask for an input in another format than its producer delivers (oneDNN's blocked
// formats); a reorder is then inserted, shared by every reader that wants the same format.
// Marked outputs are reordered to a plain layout so callers can read them without a backend.
// Under mixed precision the same reorders convert between a node's dtype and its producer's.
#include <map>
#include <numeric>

#include "compile/program.hpp"
#include "compile/reorder_layer.hpp"
#include "crest/core/error.hpp"

namespace crest::compile {
namespace {

// A reorder op from value v's format to `to`; returns the new value.
int add_reorder(Program& p, int v, const MemFormat& to, const std::string& suffix, bool grad) {
  const MemFormat from = p.val(v).fmt;
  auto layer = std::make_unique<ReorderLayer>(from, to);
  auto op = std::make_unique<Op>();
  op->name = p.val(v).name + suffix;
  op->layer = layer.get();
  op->in = {v};
  const int nv = p.add_value(op->name, p.val(v).shape);
  p.val(nv).needs_grad = grad && p.val(v).needs_grad;
  p.val(nv).split = p.val(v).split;  // the same block in another format
  p.val(nv).global_shape = p.val(v).global_shape;
  op->out = {nv};
  CreateContext rc{p.backend,
                   to.dtype,
                   p.opts.training,
                   {p.val(v).shape},
                   {p.val(v).shape},
                   {from},
                   {},
                   {p.val(nv).needs_grad},
                   0,
                   0,
                   EltwiseDesc{}};
  layer->create(rc);
  p.val(nv).fmt = rc.out_formats[0];
  op->need_input_grad = rc.need_input_grad;
  op->dtype = to.dtype;
  p.layers.push_back(std::move(layer));
  p.add_op(std::move(op));
  return nv;
}

// The format a node of dtype `dtype` is offered for a float input its producer delivers in
// another dtype: the same layout (plain for a blocked one, whose backend description carries its
// dtype) in the node's dtype. A layer that keeps the offer gets a converting reorder.
MemFormat offer_in_dtype(const MemFormat& produced, DType dtype) {
  if (produced.dtype == dtype || !is_floating(produced.dtype)) return produced;
  const Layout l = produced.layout == Layout::blocked ? Layout::plain : produced.layout;
  return plain_format(produced.shape, dtype, l);
}

void create_node(Program& p, Node& node, uint64_t position,
                 std::map<std::pair<int, std::string>, int>& reordered) {
  auto op = std::make_unique<Op>();
  op->name = node.name;
  op->random_stream = position;
  op->layer = node.layer.get();
  op->in.assign(node.inputs.begin(), node.inputs.end());
  op->out.assign(node.outputs.begin(), node.outputs.end());
  op->param_slots = node.param_slots;
  op->param_grad_scale = node.param_grad_scale;
  op->fused_into_producer = node.fused_into_producer;
  op->dtype = node.dtype;
  CreateContext cc{p.backend, node.dtype,   p.opts.training,         {}, {}, {}, {}, {}, 0,
                   0,         node.post_op, node.bias_grad_elsewhere};
  cc.folded_affine = node.fold >= 0;
  cc.name = node.name;
  if (!node.global_in.empty()) {  // split_spatially: a windowed or positional layer on a block
    cc.global_in_shapes = node.global_in;
    cc.global_out_shapes = node.global_out;
    cc.spatial = p.opts.spatial.get();
  }
  for (int v : op->in) {
    cc.in_shapes.push_back(p.val(v).shape);
    cc.in_formats.push_back(offer_in_dtype(p.val(v).fmt, node.dtype));
  }
  for (size_t i = 0; i < op->in.size(); ++i)
    cc.need_input_grad.push_back(p.val(op->in[i]).needs_grad && !node.layer->input_is_constant(i));
  for (int v : op->out) cc.out_shapes.push_back(p.val(v).shape);
  try {
    node.layer->create(cc);
  } catch (const Error& e) {
    rethrow_for_node(e, node.name, node.layer->kind());
  }
  if (cc.out_formats.size() != op->out.size())
    throw_runtime("layer '" + node.name + "' set " + std::to_string(cc.out_formats.size()) +
                  " output formats for " + std::to_string(op->out.size()) + " outputs");
  for (size_t i = 0; i < op->in.size(); ++i) {
    const int v = op->in[i];
    if (cc.in_formats[i] == p.val(v).fmt) continue;
    const auto key = std::make_pair(v, cc.in_formats[i].str());
    auto found = reordered.find(key);
    if (found == reordered.end())
      found = reordered.emplace(key, add_reorder(p, v, cc.in_formats[i], ">reorder", true)).first;
    op->in[i] = found->second;
  }
  for (size_t j = 0; j < op->out.size(); ++j) p.val(op->out[j]).fmt = cc.out_formats[j];
  if (node.channel_sum_slot >= 0) {
    op->channel_sum_slot = node.channel_sum_slot;
    op->channel_sum = make_kernel<ChannelSumKernel>(p.backend, {p.val(op->out[0]).fmt});
  }
  op->need_input_grad = cc.need_input_grad;
  op->workspace_bytes = cc.workspace_bytes;
  op->scratch_bytes = cc.scratch_bytes;
  if (node.layer->is_loss()) p.loss_op = static_cast<int>(p.ops.size());
  if (node.fold >= 0) p.folds[static_cast<size_t>(node.fold)].op = static_cast<int>(p.ops.size());
  p.add_op(std::move(op));
}

}  // namespace

void create_kernels(Program& p, const Graph& g) {
  std::map<std::pair<int, std::string>, int> reordered;  // (value, wanted format) -> value
  // A node's random stream is its position among the graph's nodes: gathers a spatial split
  // inserted do not count, so dropout masks are those of the unsplit program.
  uint64_t position = p.opts.first_random_stream;
  for (Node& node : p.nodes) {
    const uint64_t at = node.inserted ? 0 : position++;
    if (!node.folded_away) create_node(p, node, at, reordered);
  }

  p.graph_to_internal.resize(static_cast<size_t>(g.value_count()));
  std::iota(p.graph_to_internal.begin(), p.graph_to_internal.end(), 0);
  // Marked outputs are read by code outside the graph (metrics, predictions, tests), which
  // indexes them as plain row-major tensors of the compile dtype: any other layout the producer
  // chose, blocked or channels-last, or a 16-bit dtype gets a reorder.
  for (ValueId out : g.outputs()) {
    const MemFormat& f = p.val(out).fmt;
    const DType dtype = is_half(f.dtype) ? p.opts.dtype : f.dtype;
    if (f.layout != Layout::plain || f.dtype != dtype) {
      const int nv = add_reorder(p, out, plain_format(p.val(out).shape, dtype), ">plain", false);
      p.graph_to_internal[static_cast<size_t>(out)] = nv;
      p.val(nv).pinned = true;
    } else {
      p.val(out).pinned = true;
    }
  }
  for (Node& node : p.nodes) p.layers.push_back(std::move(node.layer));
  if (!p.opts.loss) return;
  if (g.loss() >= 0) p.val(g.loss()).pinned = true;
  // Backward starts at the loss layer, so a node after it (a scale of the loss) would be left
  // out of the gradient while its value was reported: the loss must be the layer's own output.
  if (g.loss() >= 0 && (p.loss_op < 0 || p.ops[static_cast<size_t>(p.loss_op)]->out.at(0) !=
                                             static_cast<int>(g.loss())))
    throw_usage(
        "the graph's loss value is not produced by a loss layer (the loss must be a "
        "loss layer's output, not a value computed from it)");
}

}  // namespace crest::compile

// Inference only: a convolution whose output only a batch norm reads becomes one convolution with
// the batch norm folded into its weights and bias (batch norm on running statistics is a
// per-channel affine, y = x * scale + shift). The batch norm runs no kernel and its input tensor
// disappears; an activation after it is then the convolution's only reader and choose_fusions
// (the next pass) fuses it, so DeepCAM's conv -> batch norm -> ReLU is one kernel.
//
// The graph's parameters are kept as they are (weights load and save under the same names); the
// folded weight and bias are extra buffers the executor recomputes before every forward pass
// (Executor::refresh_folds), which costs one pass over the convolution's weights.
#include "compile/program.hpp"

namespace crest::compile {
namespace {

// The node that reads value `v`, when it is the only reader of it; -1 otherwise.
int only_reader(const Program& p, const std::vector<int>& readers, ValueId v) {
  if (readers[static_cast<size_t>(v)] != 1) return -1;
  for (size_t b = 0; b < p.nodes.size(); ++b)
    for (ValueId in : p.nodes[b].inputs)
      if (in == v) return static_cast<int>(b);
  return -1;
}

bool can_fold(const Program& p, const Node& conv, const Node& bn) {
  return conv.layer->absorbs_channel_affine() && conv.outputs.size() == 1 &&
         conv.post_op.kind == EltwiseKind::none && bn.layer->inference_is_channel_affine() &&
         bn.inputs.size() == 1 && bn.outputs.size() == 1 &&
         p.val(bn.outputs[0]).shape == p.val(conv.outputs[0]).shape;
}

// The buffers and the per-channel vectors of one fold, sized once so forward allocates nothing.
FoldedAffine make_fold(Program& p, const Node& conv, const Node& bn) {
  FoldedAffine f;
  f.affine = bn.layer.get();
  f.own_slots = conv.param_slots;
  f.affine_slots = bn.param_slots;
  const int64_t channels = p.val(bn.outputs[0]).shape[1];
  f.scale.assign(static_cast<size_t>(channels), 1.0);
  f.shift.assign(static_cast<size_t>(channels), 0.0);
  const size_t element = dtype_size(p.params.dtype());
  const ParamSlot& weight = p.params.slots()[static_cast<size_t>(conv.param_slots[0])];
  f.folded.emplace_back(weight.count * element, 256, p.params.memory());
  f.folded.emplace_back(static_cast<size_t>(channels) * element, 256, p.params.memory());
  return f;
}

}  // namespace

void fold_batch_norm(Program& p, const Graph& g) {
  // The folded parameters are computed on the host, in the parameters' own float type.
  if (p.opts.training || !p.opts.fuse || !p.params.memory().is_host() ||
      (p.params.dtype() != DType::f32 && p.params.dtype() != DType::f64))
    return;
  const std::vector<int> readers = p.graph_readers(g);
  for (size_t a = 0; a < p.nodes.size(); ++a) {
    Node& conv = p.nodes[a];
    if (conv.folded_away || conv.outputs.size() != 1) continue;
    const int b = only_reader(p, readers, conv.outputs[0]);
    if (b < 0) continue;
    Node& bn = p.nodes[static_cast<size_t>(b)];
    if (!can_fold(p, conv, bn)) continue;
    conv.fold = static_cast<int>(p.folds.size());
    p.folds.push_back(make_fold(p, conv, bn));
    conv.outputs[0] = bn.outputs[0];
    bn.folded_away = true;
    bn.inputs.clear();
    bn.outputs.clear();
  }
}

}  // namespace crest::compile

// A spatial split (CompileOptions::spatial): which values each rank holds as a block of the
// spatial axes, and where the blocks must be gathered. Runs on the whole tensors' shapes
// infer_shapes found, then gives every split value its block's shape:
//   - graph inputs the split accepts (the samples, [n, c, spatial...]) are split;
//   - a windowed layer (convolution, pooling) on a split input gives split outputs, and keeps the
//     whole shapes for its kernel (SpatialSplit::conv/pool run it with halo exchanges);
//   - a pointwise layer whose inputs are all split gives split outputs;
//   - any other layer reading a split value reads a gathered copy instead (one gather per value,
//     inserted before its first such reader), and runs alike on every rank of the group.
// Marked outputs and the loss must be whole: a model whose prediction is itself an image
// (segmentation) is refused until outputs can be returned as blocks.
#include <map>

#include "compile/program.hpp"
#include "crest/core/error.hpp"

namespace crest::compile {
namespace {

void split_value(Value& v, SpatialSplit& s) {
  v.global_shape = v.shape;
  v.shape = s.local_shape(v.shape);
  v.split = true;
}

class SplitPass {
 public:
  SplitPass(Program& p, SpatialSplit& s) : p_(p), s_(s) {}

  // A decomposition that splits no input (its number of axes is not the samples') is refused:
  // silently running unsplit would not be what was asked.
  void split_inputs() {
    bool any = false;
    for (size_t i = 0; i < p_.inputs.size(); ++i) {
      Value& v = p_.val(static_cast<int>(i));
      if (p_.inputs[i].integer || !s_.splits(v.shape)) continue;
      split_value(v, s_);
      v.fmt = plain_format(v.shape, v.fmt.dtype, v.fmt.layout);
      any = true;
    }
    if (!any)
      throw_usage(
          "dist.spatial: no input of the model has as many spatial axes as the "
          "decomposition (give one part per spatial axis of the samples: [d, h, w] for "
          "3-D volumes, [h, w] for 2-D fields)");
  }

  void place(Node node) {
    bool any_split = false, all_split = true;
    for (ValueId v : node.inputs) {
      any_split = any_split || p_.val(v).split;
      all_split = all_split && p_.val(v).split;
    }
    if (!any_split) {
      nodes_.push_back(std::move(node));
      return;
    }
    const SpatialRole role = node.layer->spatial_role();
    if (role == SpatialRole::windowed && node.inputs.size() == 1 && window_fits(node)) {
      node.global_in = {p_.val(node.inputs[0]).global_shape};
      for (ValueId o : node.outputs) node.global_out.push_back(p_.val(o).shape);
      for (ValueId o : node.outputs) split_value(p_.val(o), s_);
    } else if (role == SpatialRole::pointwise && all_split) {
      for (ValueId o : node.outputs) split_value(p_.val(o), s_);
    } else if (role == SpatialRole::group_statistics && all_split) {
      for (ValueId o : node.outputs) split_value(p_.val(o), s_);
      p_.split_statistics = p_.split_statistics || p_.opts.training;
      node.param_grad_scale = s_.group_size();
    } else {
      for (ValueId& v : node.inputs)
        if (p_.val(v).split) v = gathered(v);
    }
    nodes_.push_back(std::move(node));
  }

  std::vector<Node> take_nodes() { return std::move(nodes_); }

 private:
  // A windowed layer the group can split. Where it cannot, its input is gathered (the volume has
  // become too small for the decomposition: the network runs whole from there on), unless the
  // input is the samples themselves: then nothing would be split, and the decomposition is
  // refused.
  bool window_fits(const Node& node) {
    const Value& in = p_.val(node.inputs[0]);
    const std::string why = s_.refusal(
        node.layer->window_axes(in.global_shape, p_.val(node.outputs[0]).shape), node.name);
    if (why.empty()) return true;
    if (in.graph_input >= 0) throw_usage(why);
    return false;
  }

  // The whole copy of split value v, gathered once.
  int gathered(int v) {
    if (auto found = gathered_.find(v); found != gathered_.end()) return found->second;
    Value& from = p_.val(v);
    Node node;
    node.name = from.name + ">gather";
    node.kind = "spatial_gather";
    node.layer = s_.gather(from.global_shape);
    node.inserted = true;
    const int nv = p_.add_value(node.name, from.global_shape);
    p_.val(nv).needs_grad = p_.val(v).needs_grad;
    node.inputs = {v};
    node.outputs = {nv};
    nodes_.push_back(std::move(node));
    gathered_.emplace(v, nv);
    return nv;
  }

  Program& p_;
  SpatialSplit& s_;
  std::vector<Node> nodes_;
  std::map<int, int> gathered_;
};

}  // namespace

void split_spatially(Program& p, const Graph& g) {
  if (!p.opts.spatial || p.opts.spatial->group_size() <= 1) return;
  if (p.opts.half)
    throw_usage(
        "dist.spatial: mixed precision (bf16/fp16) with a spatial split is not "
        "supported yet; train in float32 (crest.precision: fp32)");
  SplitPass pass(p, *p.opts.spatial);
  pass.split_inputs();
  for (Node& node : p.nodes) pass.place(std::move(node));
  p.nodes = pass.take_nodes();
  for (ValueId v : g.outputs())
    if (p.val(v).split)
      throw_usage("dist.spatial: the model's output '" + p.val(v).name +
                  "' would be split among the ranks (its prediction keeps the spatial axes); "
                  "only models whose outputs are whole (CosmoFlow's) can be split yet");
  if (g.loss() >= 0 && p.val(g.loss()).split)
    throw_usage("dist.spatial: the loss would be computed on a split tensor");
}

}  // namespace crest::compile

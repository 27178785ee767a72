// A spatial split (CompileOptions::spatial): which values each rank holds as a block of the
// spatial axes, and where the blocks must be gathered. Runs on the whole tensors' shapes
// infer_shapes found, then gives every split value its block's shape:
//   - graph inputs the split accepts (the samples, [n, c, spatial...]) are split;
//   - a windowed layer (convolution, pooling) on a split input gives split outputs, and keeps the
//     whole shapes for its kernel (SpatialSplit::conv/pool run it with halo exchanges);
//   - a positional layer (dropout: each element's mask drawn from its position in the whole
//     tensor) on split inputs gives split outputs, and is told the whole shapes;
//   - a pointwise layer whose inputs are all split, or whole with spatial extents 1 (broadcast
//     over the blocks through an inserted spatial_broadcast, which sums their gradient over the
//     group), gives split outputs;
//   - a spatial mean (global average pooling) runs on the block, and an inserted spatial_mean
//     adds the block means over the group: its output is whole;
//   - a view (flatten) of a split value read only by feature-matrix layers (dense), directly or
//     through positional layers (dropout: each runs on the block's features, told their places
//     in the whole flattened value), flattens the
//     block, and each such layer runs on the block's features with its part of the weight's
//     columns (ColumnsPartLayer, SpatialSplit::feature_columns); an inserted spatial_sum adds the
//     parts' products over the group into its whole output. No rank holds the whole weight, and
//     the features are never gathered;
//   - a position-mean loss (MSE, per-pixel cross-entropy) whose prediction has a block runs on
//     the blocks of its inputs (a whole target or label map through an inserted spatial_block,
//     which takes this rank's block of it), its block's share summed over the group
//     (SpatialSplit::loss_over_blocks);
//   - any other layer reading a split value reads a gathered copy instead (one gather per value,
//     inserted before its first such reader), and runs alike on every rank of the group;
//   - a pipeline stage's end (upstream_gradient: pairs of a sent value and its gradient, a graph
//     input) runs on what it reads: each gradient input is split exactly where its value is, so
//     a stage sends blocks where it holds blocks and gathers nothing for the stage after.
// A pipeline stage's received values are graph inputs: split as the samples are, unless the
// stage before holds them whole (CompileOptions::whole_inputs); a windowed layer that cannot
// split one gathers it, as inside a model.
// Marked outputs (a segmentation's prediction) are returned whole: where a split layer writes
// one, it writes a block and an inserted gather writes the output, so predict and the caller see
// the whole tensor; a loss on blocks reads the block, and nothing reads the whole prediction's
// gradient. With CompileOptions::split_outputs (the trainer's programs, whose metrics score
// blocks) such an output stays the block, and nothing is gathered.
#include <algorithm>
#include <map>
#include <set>

#include "compile/columns_part_layer.hpp"
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
  SplitPass(Program& p, const Graph& g, SpatialSplit& s) : p_(p), g_(g), s_(s) {
    for (const Node& node : p.nodes) {
      if (ends_stage(node))
        for (size_t i = 1; i < node.inputs.size(); i += 2) gradient_inputs_.insert(node.inputs[i]);
      const SpatialRole role = node.layer->spatial_role();
      const bool one_to_one = node.inputs.size() == 1 && node.outputs.size() == 1;
      const Reader r{one_to_one && role == SpatialRole::feature_matrix,
                     one_to_one && role == SpatialRole::positional,
                     node.outputs.empty() ? ValueId{-1} : node.outputs[0]};
      for (ValueId v : node.inputs) readers_[v].push_back(r);
    }
  }

  // A decomposition that splits no input (its number of axes is not the samples') is refused:
  // silently running unsplit would not be what was asked. A pipeline stage after the first
  // (it receives values: CompileOptions::grad_inputs) may receive only whole ones.
  void split_inputs() {
    bool any = false;
    for (size_t i = 0; i < p_.inputs.size(); ++i) {
      Value& v = p_.val(static_cast<int>(i));
      if (p_.inputs[i].integer || !s_.splits(v.shape) || named(p_.opts.whole_inputs, v.name) ||
          gradient_inputs_.count(static_cast<ValueId>(i)))
        continue;
      split_input(v);
      any = true;
    }
    if (!any && p_.opts.grad_inputs.empty())
      throw_usage(
          "dist.spatial: no input of the model has as many spatial axes as the "
          "decomposition (give one part per spatial axis of the samples: [d, h, w] for "
          "3-D volumes, [h, w] for 2-D fields)");
  }

  void place(Node node) {
    if (ends_stage(node)) return place_stage_end(std::move(node));
    if (node.inputs.size() == 1 && flat_blocks_.count(node.inputs[0]))
      return node.layer->spatial_role() == SpatialRole::positional
                 ? place_positional_on_features(std::move(node))
                 : place_columns(std::move(node));
    if (node.layer->spatial_role() == SpatialRole::position_mean && loss_takes_blocks(node))
      return place_loss_on_blocks(std::move(node));
    bool any_split = false, all_split = true, all_split_or_broadcast = true;
    for (ValueId v : node.inputs) {
      any_split = any_split || p_.val(v).split;
      all_split = all_split && p_.val(v).split;
      all_split_or_broadcast = all_split_or_broadcast && (p_.val(v).split || broadcasts(v));
    }
    if (!any_split) {
      nodes_.push_back(std::move(node));
      return;
    }
    const SpatialRole role = node.layer->spatial_role();
    if ((role == SpatialRole::windowed && node.inputs.size() == 1 && window_fits(node)) ||
        (role == SpatialRole::positional && all_split)) {
      for (ValueId v : node.inputs) node.global_in.push_back(p_.val(v).global_shape);
      for (ValueId o : node.outputs) node.global_out.push_back(p_.val(o).shape);
      place_split(std::move(node));
    } else if (role == SpatialRole::pointwise && all_split_or_broadcast) {
      for (ValueId& v : node.inputs)
        if (!p_.val(v).split) v = broadcast(v);
      place_split(std::move(node));
    } else if (role == SpatialRole::group_statistics && all_split) {
      p_.split_statistics = p_.split_statistics || p_.opts.training;
      node.param_grad_scale = s_.group_size();
      place_split(std::move(node));
    } else if (role == SpatialRole::spatial_mean && all_split && node.outputs.size() == 1) {
      place_mean(std::move(node));
    } else if (flattens_for_matrices(node)) {
      place_flat_block(std::move(node));
    } else {
      for (ValueId& v : node.inputs)
        if (p_.val(v).split) v = gathered(v);
      nodes_.push_back(std::move(node));
    }
  }

  std::vector<Node> take_nodes() { return std::move(nodes_); }

 private:
  static bool named(const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  }

  static bool ends_stage(const Node& node) { return node.layer->kind() == "upstream_gradient"; }

  void split_input(Value& v) {
    split_value(v, s_);
    v.fmt = plain_format(v.shape, v.fmt.dtype, v.fmt.layout);
  }

  // A pipeline stage's end: each (value, gradient) pair alike, the gradient split where the
  // value is. The node's output is the stage's loss (0), whole.
  void place_stage_end(Node node) {
    for (size_t i = 0; i + 1 < node.inputs.size(); i += 2)
      if (p_.val(node.inputs[i]).split) split_input(p_.val(node.inputs[i + 1]));
    nodes_.push_back(std::move(node));
  }

  // A windowed layer the group can split. Where it cannot, its input is gathered (the volume has
  // become too small for the decomposition: the network runs whole from there on), unless the
  // input is the samples themselves: then nothing would be split, and the decomposition is
  // refused. (A pipeline stage's received value is gathered as any other.)
  bool window_fits(const Node& node) {
    const Value& in = p_.val(node.inputs[0]);
    const std::string why = s_.refusal(
        node.layer->window_axes(in.global_shape, p_.val(node.outputs[0]).shape), node.name);
    if (why.empty()) return true;
    if (in.graph_input >= 0 && !named(p_.opts.grad_inputs, in.name)) throw_usage(why);
    return false;
  }

  // A view (flatten) of one split value whose output only feature-matrix layers read, directly
  // or through positional layers (a dropout between flatten and dense).
  bool flattens_for_matrices(const Node& node) const {
    if (node.inputs.size() != 1 || node.outputs.size() != 1 ||
        !node.layer->backward_needs(1, 1).view)
      return false;
    return feeds_only_matrices(node.outputs[0]);
  }

  // Whether v's readers are all feature-matrix layers, or positional layers whose outputs are
  // read likewise (and no value on the way is returned whole).
  bool feeds_only_matrices(ValueId v) const {
    std::vector<ValueId> pending{v};
    while (!pending.empty()) {
      const ValueId at = pending.back();
      pending.pop_back();
      const auto readers = readers_.find(at);
      if (returned_whole(at) || readers == readers_.end() || readers->second.empty()) return false;
      for (const Reader& r : readers->second) {
        if (r.matrix) continue;
        if (!r.positional) return false;
        pending.push_back(r.out);
      }
    }
    return true;
  }

  // The flatten of the block: [n, the block's features], in the block's channels-last order.
  void place_flat_block(Node node) {
    const Shape global = p_.val(node.inputs[0]).global_shape;
    Value& out = p_.val(node.outputs[0]);
    out.global_shape = out.shape;
    out.shape = node.layer->infer_shapes({p_.val(node.inputs[0]).shape}).at(0);
    flat_blocks_.emplace(node.outputs[0], global);
    nodes_.push_back(std::move(node));
  }

  // A positional layer (dropout) on a flattened block: it runs on the block's features, told the
  // unflattened value's whole shape (its elements' places: SpatialSplit::feature_runs), and its
  // output is a flattened block too.
  void place_positional_on_features(Node node) {
    const Shape global = flat_blocks_.at(node.inputs[0]);
    Value& out = p_.val(node.outputs[0]);
    out.global_shape = out.shape;
    out.shape = p_.val(node.inputs[0]).shape;
    node.global_in = {global};
    node.global_out = {global};
    flat_blocks_.emplace(node.outputs[0], global);
    nodes_.push_back(std::move(node));
  }

  // A feature-matrix layer on a flattened block: its part of the columns, then the group's sum
  // of the parts' products into its own (whole) output.
  void place_columns(Node node) {
    const ValueId in = node.inputs[0], out = node.outputs[0];
    const Shape out_shape = p_.val(out).shape;
    const int64_t whole_features = p_.val(in).global_shape[1];
    node.layer = std::make_unique<ColumnsPartLayer>(
        std::move(node.layer), s_.feature_columns(flat_blocks_.at(in), out_shape[1]),
        whole_features, s_.first_in_group());
    node.param_specs = node.layer->param_specs({p_.val(in).shape});
    const ValueId part = p_.add_value(p_.val(out).name + ">part", out_shape);
    p_.val(part).needs_grad = p_.val(out).needs_grad;
    node.outputs[0] = part;
    const std::string name = node.name + ">sum";
    nodes_.push_back(std::move(node));
    insert(name, "spatial_sum", s_.sum_parts(out_shape), part, out);
  }

  // The block of a loss's prediction v: v itself when split, or the block a gather wrote v from
  // when the loss is v's only reader (its gradient then comes from the block alone). -1: none.
  ValueId prediction_block(ValueId v) const {
    if (p_.val(v).split) return v;
    const auto found = block_of_whole_.find(v);
    const auto readers = readers_.find(v);
    if (found == block_of_whole_.end() || readers == readers_.end() || readers->second.size() != 1)
      return -1;
    return found->second;
  }

  // Whether a position-mean loss can run on the blocks: its prediction has one, and every other
  // input is a target of the prediction's whole shape (split or whole) or its class labels
  // (the whole shape without the channel axis).
  bool loss_takes_blocks(const Node& node) const {
    const ValueId block = prediction_block(node.inputs[0]);
    if (block < 0) return false;
    const Shape& global = p_.val(block).global_shape;
    std::vector<int64_t> labels = global.to_vector();
    labels.erase(labels.begin() + 1);
    for (size_t i = 1; i < node.inputs.size(); ++i) {
      const Value& t = p_.val(node.inputs[i]);
      const Shape& whole = t.split ? t.global_shape : t.shape;
      if (!node.layer->input_is_constant(i) || (whole != global && whole != Shape(labels)))
        return false;
    }
    return true;
  }

  void place_loss_on_blocks(Node node) {
    const ValueId block = prediction_block(node.inputs[0]);
    if (block != node.inputs[0]) p_.val(node.inputs[0]).needs_grad = false;  // no reader's now
    node.inputs[0] = block;
    for (size_t i = 1; i < node.inputs.size(); ++i)
      if (!p_.val(node.inputs[i]).split) node.inputs[i] = taken_block(node.inputs[i]);
    node.layer = s_.loss_over_blocks(std::move(node.layer), p_.val(block).global_shape);
    nodes_.push_back(std::move(node));
  }

  // This rank's block of whole target v, taken once.
  ValueId taken_block(ValueId v) {
    if (auto found = taken_.find(v); found != taken_.end()) return found->second;
    auto layer = s_.take_block(p_.val(v).shape);
    const ValueId nv = p_.add_value(p_.val(v).name + ">block", layer->infer_shapes({}).at(0));
    insert(p_.val(nv).name, "spatial_block", std::move(layer), v, nv);
    taken_.emplace(v, nv);
    return nv;
  }

  // A whole value a pointwise layer can broadcast over split blocks: every spatial extent 1.
  bool broadcasts(ValueId v) const {
    const Shape& s = p_.val(v).shape;
    if (p_.val(v).graph_input >= 0 || s.rank() < 3) return false;
    for (int a = 2; a < s.rank(); ++a)
      if (s[a] != 1) return false;
    return true;
  }

  // A node whose outputs are split. An output the caller reads (a marked output, the loss) stays
  // whole: the node writes a block of it, and an inserted gather the output itself.
  void place_split(Node node) {
    std::vector<std::pair<ValueId, ValueId>> returned;  // (block, whole output)
    for (ValueId& o : node.outputs) {
      split_value(p_.val(o), s_);
      if (!returned_whole(o)) continue;
      const ValueId block = renamed_block(o);
      returned.emplace_back(block, o);
      o = block;
    }
    nodes_.push_back(std::move(node));
    for (const auto& [block, whole] : returned) insert_gather(block, whole);
  }

  // The loss, and marked outputs unless the caller takes them as blocks (split_outputs).
  bool returned_whole(ValueId v) const {
    const auto& outs = g_.outputs();
    return v == g_.loss() ||
           (!p_.opts.split_outputs && std::find(outs.begin(), outs.end(), v) != outs.end());
  }

  // A new split value that takes over v's block; v becomes whole again.
  ValueId renamed_block(ValueId v) {
    const ValueId block = p_.add_value(p_.val(v).name + ">block", p_.val(v).shape);
    Value& b = p_.val(block);
    Value& whole = p_.val(v);
    b.split = true;
    b.global_shape = whole.global_shape;
    b.needs_grad = whole.needs_grad;
    whole.shape = whole.global_shape;
    whole.split = false;
    return block;
  }

  // A spatial mean on the block, then the group's weighted sum of the block means into the
  // node's own output (whole, so its readers run alike on every rank).
  void place_mean(Node node) {
    const ValueId out = node.outputs[0];
    const ValueId block_mean = p_.add_value(p_.val(out).name + ">block", p_.val(out).shape);
    p_.val(block_mean).needs_grad = p_.val(out).needs_grad;
    const Shape global_in = p_.val(node.inputs[0]).global_shape;
    node.outputs[0] = block_mean;
    const std::string name = node.name + ">group";
    nodes_.push_back(std::move(node));
    insert(name, "spatial_mean", s_.mean_over_group(global_in), block_mean, out);
  }

  // Whole value v, broadcast over the blocks (once per value).
  ValueId broadcast(ValueId v) {
    if (auto found = broadcast_.find(v); found != broadcast_.end()) return found->second;
    const ValueId nv = p_.add_value(p_.val(v).name + ">broadcast", p_.val(v).shape);
    p_.val(nv).needs_grad = p_.val(v).needs_grad;
    insert(p_.val(nv).name, "spatial_broadcast", s_.broadcast(p_.val(v).shape), v, nv);
    broadcast_.emplace(v, nv);
    return nv;
  }

  // The whole copy of split value v, gathered once.
  ValueId gathered(ValueId v) {
    if (auto found = gathered_.find(v); found != gathered_.end()) return found->second;
    const ValueId nv = p_.add_value(p_.val(v).name + ">gather", p_.val(v).global_shape);
    p_.val(nv).needs_grad = p_.val(v).needs_grad;
    insert_gather(v, nv);
    return nv;
  }

  void insert_gather(ValueId block, ValueId whole) {
    insert(p_.val(block).name + ">gather", "spatial_gather", s_.gather(p_.val(block).global_shape),
           block, whole);
    gathered_.emplace(block, whole);
    block_of_whole_.emplace(whole, block);
  }

  // A node the pass adds (no graph position: it draws no random numbers).
  void insert(const std::string& name, const std::string& kind, std::unique_ptr<Layer> layer,
              ValueId in, ValueId out) {
    Node node;
    node.name = name;
    node.kind = kind;
    node.layer = std::move(layer);
    node.inserted = true;
    node.inputs = {in};
    node.outputs = {out};
    nodes_.push_back(std::move(node));
  }

  Program& p_;
  const Graph& g_;
  SpatialSplit& s_;
  std::vector<Node> nodes_;
  std::map<ValueId, ValueId> gathered_, broadcast_, taken_;
  std::map<ValueId, ValueId> block_of_whole_;  // a gather's whole output: the block it read
  // Per value of the program as it came, its readers: whether each is a one-input, one-output
  // feature-matrix layer or positional layer, and its (first) output.
  struct Reader {
    bool matrix = false, positional = false;
    ValueId out = -1;
  };
  std::map<ValueId, std::vector<Reader>> readers_;
  std::map<ValueId, Shape> flat_blocks_;  // flattened blocks: the split value's whole shape
  std::set<ValueId> gradient_inputs_;     // a stage end's gradient inputs (place_stage_end)
};

}  // namespace

void split_spatially(Program& p, const Graph& g) {
  if (!p.opts.spatial || p.opts.spatial->group_size() <= 1) return;
  if (p.opts.half)
    throw_usage(
        "dist.spatial: mixed precision (bf16/fp16) with a spatial split is not "
        "supported yet; train in float32 (crest.precision: fp32)");
  SplitPass pass(p, g, *p.opts.spatial);
  pass.split_inputs();
  for (Node& node : p.nodes) pass.place(std::move(node));
  p.nodes = pass.take_nodes();
  if (p.opts.split_outputs) return;
  for (ValueId v : g.outputs()) CREST_CHECK(!p.val(v).split, "a marked output left split");
}

}  // namespace crest::compile

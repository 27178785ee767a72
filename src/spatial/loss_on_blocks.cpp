// The loss on the blocks of a split prediction (loss_on_blocks.hpp). A position-mean loss is
// (1/N) Σ over the whole prediction's N elements of a term that reads each position alone, so a
// rank's block contributes (n/N) × (its block's mean over n elements): the wrapped loss computes
// the block's mean, this layer weights it by the share n/N and sums it over the group. The
// gradient of an element is the whole loss's whatever block holds it: the wrapped backward run
// with the loss scale times the share. Nothing but one double crosses the group, when the loss is
// read after the step, and no rank holds the whole prediction for the loss.
#include "crest/spatial/loss_on_blocks.hpp"

#include <string>
#include <utility>
#include <vector>

#include "crest/core/error.hpp"

namespace crest {
namespace {

class LossOnBlocksLayer final : public Layer {
 public:
  LossOnBlocksLayer(std::unique_ptr<Layer> loss, Communicator& group, Shape global)
      : inner_(std::move(loss)), group_(&group), global_(global) {
    CREST_CHECK(inner_->spatial_role() == SpatialRole::position_mean,
                "only a position-mean loss runs on blocks");
  }
  std::string kind() const override { return inner_->kind(); }
  bool computes_in_half() const override { return inner_->computes_in_half(); }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override {
    return inner_->infer_shapes(in);
  }
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override {
    return inner_->backward_needs(n_in, n_out);
  }
  bool is_loss() const override { return true; }
  bool reads_logits() const override { return inner_->reads_logits(); }
  bool input_is_constant(size_t i) const override { return inner_->input_is_constant(i); }
  SpatialRole spatial_role() const override { return SpatialRole::position_mean; }

  void create(CreateContext& ctx) override {
    share_ = static_cast<double>(ctx.in_shapes[0].numel()) / static_cast<double>(global_.numel());
    inner_->create(ctx);
  }
  // The output tensor holds this block's share; the loss, the group's sum of the shares, is
  // summed when it is read (loss_from), so the pass waits for no rank.
  void forward(RunContext& ctx) override {
    inner_->forward(ctx);
    ctx.vec->scale(share_, ctx.out[0], ctx.out[0], 1);
  }
  double loss_from(const double* written) const override {
    double loss = inner_->loss_from(written) * share_;
    group_->allreduce_sum(&loss, 1);
    return loss;
  }
  void backward(RunContext& ctx) override {
    const double scale = ctx.loss_scale;
    ctx.loss_scale = scale * share_;
    inner_->backward(ctx);
    ctx.loss_scale = scale;
  }
  Flops flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const override {
    return inner_->flops(in, out);
  }
  std::string describe() const override {
    const std::string own = inner_->describe();
    return (own.empty() ? "" : own + "; ") + "on " + std::to_string(group_->size()) +
           " blocks, their shares summed over the group";
  }
  std::string implementation() const override { return inner_->implementation(); }

 private:
  std::unique_ptr<Layer> inner_;
  Communicator* group_;
  Shape global_;
  double share_ = 1;
};

// Class labels [n, spatial...] are blocked as [n, 1, spatial...]: the same memory.
Shape with_channel_axis(const Shape& global, const SpatialSplit& split) {
  if (split.splits(global)) return global;
  std::vector<int64_t> dims{global[0], 1};
  for (int a = 1; a < global.rank(); ++a) dims.push_back(global[a]);
  const Shape labels(dims);
  CREST_CHECK(split.splits(labels), "a loss's target on blocks is [n, c, spatial...] or labels");
  return labels;
}

class TakeBlockLayer final : public Layer {
 public:
  TakeBlockLayer(const SpatialSplit& split, Shape global) : split_(&split), global_(global) {}
  std::string kind() const override { return "spatial_block"; }
  bool computes_in_half() const override { return false; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>&) const override {
    return {target_block_shape(*split_, global_)};
  }
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override {
    return {std::vector<bool>(n_in, false), std::vector<bool>(n_out, false), false};
  }
  void create(CreateContext& ctx) override {
    dtype_ = ctx.in_formats[0].dtype;
    ctx.in_formats[0] = plain_format(global_, dtype_);
    ctx.out_formats = {plain_format(infer_shapes({}).at(0), dtype_)};
  }
  void forward(RunContext& ctx) override {
    copy_target_block(*split_, ctx.in[0], global_, Layout::plain, dtype_, ctx.out[0]);
  }
  void backward(RunContext&) override {}  // a target: no gradient
  std::string describe() const override { return "this rank's block of the loss's target"; }

 private:
  const SpatialSplit* split_;
  Shape global_;
  DType dtype_ = DType::f32;
};

}  // namespace

std::unique_ptr<Layer> make_loss_on_blocks(std::unique_ptr<Layer> loss, Communicator& group,
                                           const Shape& global) {
  return std::make_unique<LossOnBlocksLayer>(std::move(loss), group, global);
}

Shape target_block_shape(const SpatialSplit& split, const Shape& global) {
  const Shape blocked_as = with_channel_axis(global, split);
  const Shape local = split.local_shape(blocked_as);
  if (blocked_as == global) return local;
  std::vector<int64_t> dims = local.to_vector();
  dims.erase(dims.begin() + 1);
  return Shape(dims);
}

void copy_target_block(const SpatialSplit& split, const void* whole, const Shape& global,
                       Layout layout, DType dtype, void* block) {
  const Shape blocked_as = with_channel_axis(global, split);
  split.copy_block(whole, blocked_as, blocked_as == global ? layout : Layout::plain, dtype, block);
}

std::unique_ptr<Layer> make_take_block(const SpatialSplit& split, const Shape& global) {
  return std::make_unique<TakeBlockLayer>(split, global);
}

}  // namespace crest

// A feature-matrix layer (SpatialRole::feature_matrix: dense) run on this rank's block of a
// flattened split value (split_spatially.cpp): the wrapped layer, compiled for the block's
// features, computes x_block W_part^T with its part of W's columns, and the compile sums the
// parts' products over the group after it. Its rank-2 parameter is W, divided by columns
// (ParamSpec::shard); its other parameters (the bias) stay whole, and only the group's first rank
// adds them to its product — the others read zeros — so the group's sum adds them once. Their
// gradient is the whole one on every rank (the output gradient is whole), as for a layer every
// rank runs alike; W's part's gradient is the rank's own columns' (averaged over its replicas).
#pragma once
#include <memory>
#include <vector>

#include "crest/graph/layer.hpp"
#include "crest/graph/param_shard.hpp"

namespace crest::compile {

class ColumnsPartLayer final : public Layer {
 public:
  // `whole_features`: the features of the whole flattened value; `adds_rest`: whether this rank
  // adds the layer's other parameters.
  ColumnsPartLayer(std::unique_ptr<Layer> inner, std::shared_ptr<const ParamShard> columns,
                   int64_t whole_features, bool adds_rest);
  std::string kind() const override { return inner_->kind(); }
  bool computes_in_half() const override { return inner_->computes_in_half(); }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override {
    return inner_->infer_shapes(in);
  }
  // The wrapped layer's, for the block's features: W's becomes the part, and every
  // parameter's fan-in the whole layer's (its initial values are drawn as an unsplit run's).
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override {
    return inner_->backward_needs(n_in, n_out);
  }
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override { inner_->backward(ctx); }
  Flops flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const override {
    return inner_->flops(in, out);
  }
  std::string describe() const override;
  std::string implementation() const override { return inner_->implementation(); }

 private:
  std::unique_ptr<Layer> inner_;
  std::shared_ptr<const ParamShard> columns_;
  int64_t whole_features_;
  bool adds_rest_;
  std::vector<size_t> rest_;   // indices of the parameters other than W
  std::vector<double> zeros_;  // what the other ranks read for them (f32 or f64 alike)
  std::vector<void*> own_;     // their own pointers while a forward reads zeros
};

}  // namespace crest::compile

#include "columns_part_layer.hpp"

#include <algorithm>
#include <utility>

#include "crest/core/error.hpp"

namespace crest::compile {

ColumnsPartLayer::ColumnsPartLayer(std::unique_ptr<Layer> inner,
                                   std::shared_ptr<const ParamShard> columns,
                                   int64_t whole_features, bool adds_rest)
    : inner_(std::move(inner)),
      columns_(std::move(columns)),
      whole_features_(whole_features),
      adds_rest_(adds_rest) {}

std::vector<ParamSpec> ColumnsPartLayer::param_specs(const std::vector<Shape>& in) const {
  std::vector<ParamSpec> specs = inner_->param_specs(in);
  const int64_t part_features = in.at(0)[1];
  int matrices = 0;
  for (ParamSpec& spec : specs) {
    if (spec.fan_in == part_features) spec.fan_in = whole_features_;
    if (spec.shape.rank() != 2) continue;
    CREST_CHECK(spec.shape == columns_->part_shape(),
                "a feature matrix's weight is not the part of its columns");
    spec.shard = columns_;
    ++matrices;
  }
  CREST_CHECK(matrices == 1, "a feature-matrix layer has one rank-2 parameter");
  return specs;
}

void ColumnsPartLayer::create(CreateContext& ctx) {
  inner_->create(ctx);
  rest_.clear();  // create runs again when a program is recompiled
  int64_t largest = 0;
  const std::vector<ParamSpec> specs = param_specs(ctx.in_shapes);
  for (size_t i = 0; i < specs.size(); ++i)
    if (!specs[i].shard) {
      rest_.push_back(i);
      largest = std::max(largest, specs[i].shape.numel());
    }
  zeros_.assign(static_cast<size_t>(largest), 0.0);
  own_.resize(rest_.size());
}

void ColumnsPartLayer::forward(RunContext& ctx) {
  if (adds_rest_) return inner_->forward(ctx);
  // The other ranks multiply with their W part but read zeros for the rest (the bias).
  for (size_t k = 0; k < rest_.size(); ++k)
    own_[k] = std::exchange(ctx.params[rest_[k]], zeros_.data());
  inner_->forward(ctx);
  for (size_t k = 0; k < rest_.size(); ++k) ctx.params[rest_[k]] = own_[k];
}

std::string ColumnsPartLayer::describe() const {
  const std::string inner = inner_->describe();
  return (inner.empty() ? "" : inner + "; ") + "columns of this rank's block of " +
         std::to_string(whole_features_) + " features";
}

}  // namespace crest::compile

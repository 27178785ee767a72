#include "metric_scoring.hpp"

#include <utility>

#include "crest/core/error.hpp"
#include "crest/spatial/loss_on_blocks.hpp"

namespace crest {

MetricScoring::MetricScoring(std::vector<const Metric*> metrics)
    : MetricScoring(std::move(metrics), nullptr, Shape{}) {}

MetricScoring::MetricScoring(std::vector<const Metric*> metrics, const SpatialSplit* split,
                             Shape whole_sample)
    : metrics_(std::move(metrics)), split_(split), whole_sample_(whole_sample) {
  for (const Metric* m : metrics_) {
    at_.push_back(sums_);
    sums_ += static_cast<size_t>(m->sums);
  }
}

void MetricScoring::add(const TensorView& pred, const TensorView& target, double* sums) {
  if (!split_) {
    for (size_t k = 0; k < metrics_.size(); ++k)
      metrics_[k]->accumulate(pred, target, sums + at_[k]);
    return;
  }
  // Every metric's counts of the blocks, summed over the group at once.
  const int64_t samples = pred.shape()[0];
  const TensorView block = target_block(target);
  std::vector<size_t> counts_at;
  counts_.clear();
  for (const Metric* m : metrics_) {
    counts_at.push_back(counts_.size());
    counts_.resize(counts_.size() +
                   static_cast<size_t>(samples * m->counts_per_sample(pred.desc())));
    m->count(pred, block, counts_.data() + counts_at.back());
  }
  split_->sum_over_group(counts_.data(), counts_.size());
  for (size_t k = 0; k < metrics_.size(); ++k)
    metrics_[k]->add_counts(counts_.data() + counts_at[k], samples,
                            metrics_[k]->counts_per_sample(pred.desc()), sums + at_[k]);
}

TensorView MetricScoring::target_block(const TensorView& target) {
  // The block is cut where the prediction's is: the targets' spatial extents are its whole's.
  const Shape whole = target.shape();
  const int spatial = whole_sample_.rank() - 1;
  bool fits = whole.rank() >= spatial + 1;
  for (int a = 0; fits && a < spatial; ++a)
    fits = whole[whole.rank() - spatial + a] == whole_sample_[1 + a];
  if (!fits)
    throw_input("metrics: the targets " + whole.str() +
                " do not have the spatial extents of the whole prediction " + whole_sample_.str() +
                ", which each rank scores its block of");
  TensorDesc d = target.desc();
  d.shape = target_block_shape(*split_, whole);
  target_block_.resize(static_cast<size_t>(d.shape.numel()) * dtype_size(d.dtype));
  copy_target_block(*split_, target.data(), whole, d.layout, d.dtype, target_block_.data());
  return TensorView(target_block_.data(), d);
}

std::vector<MetricValue> MetricScoring::values(const double* sums) const {
  std::vector<MetricValue> v;
  for (size_t k = 0; k < metrics_.size(); ++k)
    v.push_back({metrics_[k]->short_name, metrics_[k]->value(sums + at_[k])});
  return v;
}

}  // namespace crest

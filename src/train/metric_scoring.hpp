// The task's metrics on a batch's prediction, into running sums laid out one metric after
// another (a validation pass's PassSums, an epoch's LastBatchFigures). Where the prediction is
// this rank's block of spatially split samples (the trainer's programs keep it split:
// CompileOptions::split_outputs), each metric counts the block against this rank's block of the
// targets, and the spatial group's sum of those counts is the whole samples': the figures equal
// the unsplit run's, and no rank gathers or holds the whole prediction (docs/distributed.md,
// "Metrics on blocks").
#pragma once
#include <cstddef>
#include <vector>

#include "crest/graph/spatial_split.hpp"
#include "crest/train/metric.hpp"

namespace crest {

class MetricScoring {
 public:
  // Predictions of whole samples.
  explicit MetricScoring(std::vector<const Metric*> metrics);
  // Predictions that are `split`'s blocks of samples whose whole prediction is `whole_sample`
  // (batch excluded; null `split`: whole predictions).
  MetricScoring(std::vector<const Metric*> metrics, const SpatialSplit* split, Shape whole_sample);

  bool empty() const { return metrics_.empty(); }
  size_t sums() const { return sums_; }  // the running sums of every metric together
  // Adds the batch `pred` (whole samples, or this rank's blocks) against `target` (the loader's
  // whole targets) into `sums`. Over a split, a collective of the spatial group: its ranks add
  // the same batches together.
  void add(const TensorView& pred, const TensorView& target, double* sums);
  // Each metric's figure from its sums.
  std::vector<MetricValue> values(const double* sums) const;

 private:
  // This rank's block of whole targets `target`, in target_block_.
  TensorView target_block(const TensorView& target);

  std::vector<const Metric*> metrics_;
  std::vector<size_t> at_;  // where each metric's sums start
  size_t sums_ = 0;
  const SpatialSplit* split_ = nullptr;
  Shape whole_sample_;
  std::vector<std::byte> target_block_;
  std::vector<double> counts_;
};

}  // namespace crest

// The running sums of a validation pass (validation.cpp, and a pipeline's, pipeline_batches.cpp):
// the loss, the samples and each metric's sums, reduced over ranks at once.
#pragma once
#include <vector>

#include "crest/dist/communicator.hpp"
#include "crest/graph/executor.hpp"
#include "metric_scoring.hpp"
#include "rank_failure.hpp"
#include "validation.hpp"

namespace crest {

// The running sums of a pass, in one vector reduced over ranks at once:
// [loss weight-sum, weight, samples, skipped, failed ranks, each metric's sums...]. The loss is the
// batch mean of the compiled batch, so a complete batch weighs 1 and a single sample 1/batch: with
// complete batches only, the sum and the weight are exactly those of a mean of batch losses.
class PassSums {
 public:
  explicit PassSums(MetricScoring& scoring) : scoring_(scoring) {
    sums_.assign(kMetrics + scoring.sums(), 0.0);
  }
  // One forward pass over `samples` samples of a compiled batch of `batch`.
  void add_pass(const Executor& ex, int64_t samples, int64_t batch) {
    const double weight = static_cast<double>(samples) / static_cast<double>(batch);
    sums_[kLoss] += ex.last_data_loss() * weight;
    sums_[kWeight] += weight;
    sums_[kSamples] += static_cast<double>(samples);
  }
  // Over a spatial split, a collective of the group (MetricScoring::add).
  void add_metrics(const TensorView& pred, const TensorView& target) {
    scoring_.add(pred, target, &sums_[kMetrics]);
  }
  // Throws on every rank, naming the lowest failing one, when `failure` holds on any.
  ValidationResult reduce(Communicator& comm, int64_t skipped, const RankFailure& failure,
                          int epoch) {
    sums_[kSkipped] = static_cast<double>(skipped);
    sums_[kFailed] = failure.failed() ? 1 : 0;
    comm.allreduce_sum(sums_.data(), sums_.size());
    if (sums_[kFailed] > 0)
      failure.throw_together(comm, "the validation of epoch " + std::to_string(epoch + 1));
    ValidationResult r;
    r.loss = sums_[kWeight] > 0 ? sums_[kLoss] / sums_[kWeight] : 0;
    r.samples = static_cast<int64_t>(sums_[kSamples]);
    r.skipped = static_cast<int64_t>(sums_[kSkipped]);
    r.metrics = scoring_.values(&sums_[kMetrics]);
    return r;
  }
  bool has_metrics() const { return !scoring_.empty(); }

 private:
  static constexpr size_t kLoss = 0, kWeight = 1, kSamples = 2, kSkipped = 3, kFailed = 4,
                          kMetrics = 5;
  MetricScoring& scoring_;
  std::vector<double> sums_;
};

}  // namespace crest

#include "validation.hpp"

#include "rank_failure.hpp"
#include "test_faults.hpp"

namespace crest {
namespace {

// The running sums of a pass, in one vector reduced over ranks at once:
// [loss weight-sum, weight, samples, skipped, failed ranks, each metric's sums...]. The loss is the
// batch mean of the compiled batch, so a complete batch weighs 1 and a single sample 1/batch: with
// complete batches only, the sum and the weight are exactly those of a mean of batch losses.
class PassSums {
 public:
  explicit PassSums(const Task& task) : task_(task) {
    size_t at = kMetrics;
    for (const Metric* m : task.metrics) {
      metric_at_.push_back(at);
      at += static_cast<size_t>(m->sums);
    }
    sums_.assign(at, 0.0);
  }
  // One forward pass over `samples` samples of a compiled batch of `batch`.
  void add_pass(const Executor& ex, int64_t samples, int64_t batch) {
    const double weight = static_cast<double>(samples) / static_cast<double>(batch);
    sums_[kLoss] += ex.last_data_loss() * weight;
    sums_[kWeight] += weight;
    sums_[kSamples] += static_cast<double>(samples);
  }
  void add_metrics(const TensorView& pred, const TensorView& target) {
    for (size_t k = 0; k < task_.metrics.size(); ++k)
      task_.metrics[k]->accumulate(pred, target, &sums_[metric_at_[k]]);
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
    for (size_t k = 0; k < task_.metrics.size(); ++k)
      r.metrics.push_back(
          {task_.metrics[k]->short_name, task_.metrics[k]->value(&sums_[metric_at_[k]])});
    return r;
  }
  bool has_metrics() const { return !task_.metrics.empty(); }

 private:
  static constexpr size_t kLoss = 0, kWeight = 1, kSamples = 2, kSkipped = 3, kFailed = 4,
                          kMetrics = 5;
  const Task& task_;
  std::vector<size_t> metric_at_;
  std::vector<double> sums_;
};

// The first sample of a batch-first view: what one copied sample's pass is scored on.
TensorView first_sample(const TensorView& t) {
  TensorDesc d = t.desc();
  d.shape = t.shape().without_batch().with_batch(1);
  return TensorView(t.data(), d);
}

void validate_complete(Executor& ex, BatchFeed& feed, const LoadedBatch& b, PassSums& sums) {
  feed.feed(b);
  ex.forward(false);
  const int64_t batch = b.sample.shape()[0];
  sums.add_pass(ex, batch, batch);
  if (sums.has_metrics()) sums.add_metrics(feed.host_prediction(), b.target);
}

void validate_sample_by_sample(Executor& ex, BatchFeed& feed, const LoadedBatch& b,
                               PassSums& sums) {
  const int64_t batch = b.sample.shape()[0];
  const size_t target_bytes = b.target.bytes() / static_cast<size_t>(batch);
  for (int64_t place = 0; place < batch; ++place) {
    if (!b.present[static_cast<size_t>(place)]) continue;
    feed.feed_copies_of(b, place);
    ex.forward(false);
    sums.add_pass(ex, 1, batch);
    if (!sums.has_metrics()) continue;
    TensorView target = first_sample(b.target);
    target =
        TensorView(static_cast<char*>(b.target.data()) + static_cast<size_t>(place) * target_bytes,
                   target.desc());
    sums.add_metrics(first_sample(feed.host_prediction()), target);
  }
}

void validate_batch(Executor& ex, BatchFeed& feed, DataLoader& loader, PassSums& sums,
                    bool test_failure) {
  const LoadedBatch b = loader.next();
  if (test_failure) {
    loader.release(b);
    throw_input(
        "test fault: a validation batch could not be read "
        "(CREST_TEST_VALIDATION_FAILURE_AT_EPOCH)");
  }
  if (b.complete())
    validate_complete(ex, feed, b, sums);
  else
    validate_sample_by_sample(ex, feed, b, sums);
  loader.release(b);
}

}  // namespace

ValidationResult validate(Executor& ex, BatchFeed& feed, DataLoader& loader, const Task& task,
                          Communicator& comm, int epoch) {
  PassSums sums(task);
  RankFailure failure;
  loader.start_epoch(epoch);
  for (int64_t s = 0; s < loader.plan().batches; ++s) {
    try {
      validate_batch(ex, feed, loader, sums,
                     s == 0 && validation_failure_asked(epoch + 1, comm.rank()));
    } catch (const std::exception& e) {
      // On more than one rank: the others are validating towards the final sum; this rank goes
      // there at once, and the sum tells every rank that it failed.
      if (comm.size() == 1) throw;
      failure.record(e);
      break;
    }
  }
  return sums.reduce(comm, loader.stats().skipped, failure, epoch);
}

}  // namespace crest

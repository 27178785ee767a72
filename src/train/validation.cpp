#include "validation.hpp"

namespace crest {
namespace {

// Where each metric's running sums start in one vector that is reduced over ranks at once.
std::vector<size_t> sum_offsets(const Task& task, size_t first) {
  std::vector<size_t> at;
  for (const Metric* m : task.metrics) {
    at.push_back(first);
    first += static_cast<size_t>(m->sums);
  }
  at.push_back(first);
  return at;
}

}  // namespace

ValidationResult validate(Executor& ex, BatchFeed& feed, DataLoader& loader, const Task& task,
                          Communicator& comm, int epoch) {
  // sums = [loss sum, batches, skipped, each metric's sums...]
  const std::vector<size_t> at = sum_offsets(task, 3);
  std::vector<double> sums(at.back(), 0.0);
  loader.start_epoch(epoch);
  for (int64_t s = 0; s < loader.plan().batches; ++s) {
    const LoadedBatch b = loader.next();
    feed.feed(b);
    ex.forward(false);
    sums[0] += ex.last_data_loss();
    if (!task.metrics.empty()) {
      const TensorView pred = feed.host_prediction();
      for (size_t k = 0; k < task.metrics.size(); ++k)
        task.metrics[k]->accumulate(pred, b.target, &sums[at[k]]);
    }
    loader.release(b);
  }
  sums[1] = static_cast<double>(loader.plan().batches);
  sums[2] = static_cast<double>(loader.stats().skipped);
  comm.allreduce_sum(sums.data(), sums.size());
  ValidationResult r;
  // Every batch has the same size, so the mean of batch means over all ranks is the mean.
  r.loss = sums[1] > 0 ? sums[0] / sums[1] : 0;
  r.skipped = static_cast<int64_t>(sums[2]);
  for (size_t k = 0; k < task.metrics.size(); ++k)
    r.metrics.push_back({task.metrics[k]->short_name, task.metrics[k]->value(&sums[at[k]])});
  return r;
}

}  // namespace crest

// The validation pass of an epoch: the loss and the task's metrics over the validation shard,
// reduced over all ranks.
#pragma once
#include <vector>

#include "batch_feed.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/train/task.hpp"

namespace crest {

struct ValidationResult {
  double loss = 0;                   // mean over the job's validation batches
  std::vector<MetricValue> metrics;  // the task's, in its order
  int64_t skipped = 0;               // bad samples dropped, job-wide
};

// Evaluates (dropout off) every validation batch of `epoch` (0-based) on every rank.
ValidationResult validate(Executor& ex, BatchFeed& feed, DataLoader& loader, const Task& task,
                          Communicator& comm, int epoch);

}  // namespace crest

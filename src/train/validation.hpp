// The validation pass of an epoch: the loss and the task's metrics over the validation shard,
// reduced over all ranks.
#pragma once
#include <vector>

#include "crest/dist/communicator.hpp"
#include "crest/train/batch_feed.hpp"
#include "crest/train/task.hpp"
#include "metric_scoring.hpp"

namespace crest {

struct ValidationResult {
  double loss = 0;                   // mean per-sample loss over the job's validation samples
  std::vector<MetricValue> metrics;  // the task's, in its order, over the same samples
  int64_t samples = 0;               // validated, job-wide
  int64_t skipped = 0;               // bad samples dropped, job-wide
};

// Evaluates (dropout off, batch norm on its running statistics) every validation batch of
// `epoch` (0-based) on every rank. A complete batch is one forward pass; an incomplete one (the
// partial last batch of an every-sample loader, or places left empty by skipped samples) is
// evaluated sample by sample, each copied into every place of the compiled batch, so the loss
// and the metrics are means over samples whatever the batches held. The ranks may run different
// batch counts: the only collective over `comm` is the final sum (the metrics over a spatial
// split are also sums over its group, whose ranks run the same batches).
ValidationResult validate(Executor& ex, BatchFeed& feed, DataLoader& loader, MetricScoring& scoring,
                          Communicator& comm, int epoch);

}  // namespace crest

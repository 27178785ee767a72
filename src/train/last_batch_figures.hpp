// The figures of an epoch's last training micro-batch, as the DeepCAM reference logs them at the
// end of every epoch (driver/trainer.py: train_loss and train_accuracy): the micro-batch's loss
// and the task's metrics scored on the prediction it was trained on (before the update), each a
// mean over ranks.
#pragma once
#include <vector>

#include "crest/data/loader.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/train/trainer.hpp"
#include "metric_scoring.hpp"

namespace crest {

class LastBatchFigures {
 public:
  explicit LastBatchFigures(MetricScoring& scoring);
  // This rank's micro-batch: its loss, and `pred` (its prediction, batch first, host memory; its
  // blocks over a spatial split, when record() is a collective of the group) scored against
  // `batch`'s targets at the places that hold a sample. Replaces an earlier record.
  void record(double loss, const TensorView& pred, const LoadedBatch& batch);
  // The job-wide figures into st.last_batch_loss and st.last_batch_metrics: the ranks' mean loss
  // and each metric over all ranks' samples (with equal batches, the mean of the ranks' values, as
  // the reference averages them). Collective: every rank calls it once per epoch.
  void reduce(Communicator& comm, EpochStats& st);

 private:
  MetricScoring& scoring_;
  std::vector<double> sums_;  // [loss, 1 per recording rank, each metric's sums...]
};

}  // namespace crest

// The lines a run prints per epoch and at its end (rank 0's log and train.log): the figures
// people grep for (tests and the MLPerf checks read "val_mae" from them).
#pragma once
#include <iosfwd>

#include "crest/train/trainer.hpp"

namespace crest {

class EpochLog {
 public:
  EpochLog(std::ostream& log, int n_epochs) : log_(log), n_epochs_(n_epochs) {}

  // "epoch 3/10  loss 0.0123  val_loss 0.0131  val_mae 0.0912  lr 0.00100  ...  ETA 2m"
  void epoch(const EpochStats& st);
  // "done: 3 epochs in 12.3 s; final loss 0.0123, val_mae 0.0912; 8,907,556 parameters; ..."
  void done(const TrainSummary& summary, double seconds);

 private:
  std::ostream& log_;
  int n_epochs_;
  // This invocation's epochs, for the ETA.
  double epochs_s_ = 0;
  int epochs_ = 0;
};

}  // namespace crest

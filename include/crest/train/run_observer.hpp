// RunObserver: what a training run tells the records it leaves (MLPerf log, TensorBoard, progress,
// performance report). The trainer calls every observer at the same points, in this order:
//
//   init_start → [staging_start → staging_stop] → init_stop → run_start →
//     (epoch_start → step_end × steps → [eval_start → eval_stop] → epoch_stop)* → run_stop
//
// Only rank 0 has observers; every figure passed in is already job-wide (reduced over ranks)
// unless its comment says otherwise. Observers read the wall clock themselves when they need the
// time of an event: each call happens when the event happens.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "crest/graph/executor.hpp"
#include "crest/graph/spatial_split.hpp"
#include "crest/train/config.hpp"

namespace crest {

struct EpochStats;
struct TrainSummary;

// What an observer may ask of the run it watches (RunFacts::control): to stop, or to write a
// checkpoint. A request is honoured at the end of the epoch it was made in, after every
// observer's epoch_stop (a callback that reads the epoch's metrics decides there), and reaches
// every rank with one small collective per epoch (only rank 0 has observers).
class RunControl {
 public:
  // The run ends after this epoch, its checkpoint written, as early stopping ends it (status
  // success, or aborted when a quality target was not reached); `why` goes to the log and the
  // summary's stop_reason.
  void request_stop(std::string why) {
    stop_ = true;
    why_ = std::move(why);
  }
  // A checkpoint at the end of this epoch, whatever train.checkpoint_every says.
  void request_checkpoint() { checkpoint_ = true; }

  bool stop_requested() const { return stop_; }
  const std::string& stop_reason() const { return why_; }
  bool checkpoint_requested() const { return checkpoint_; }
  void clear_checkpoint_request() { checkpoint_ = false; }

 private:
  bool stop_ = false, checkpoint_ = false;
  std::string why_;
};

// Facts about the run known once the model is built and the data opened.
struct RunFacts {
  const Config* config = nullptr;
  int ranks = 1, local_ranks = 1;  // local_ranks: ranks on rank 0's node
  int nodes = 1;                   // ranks / local_ranks, rounded up
  int threads = 1;                 // compute threads per rank
  std::string backend;             // "onednn", "reference"
  std::string isa;                 // what it dispatches to ("oneDNN AVX2, crest loops AVX2")
  int64_t global_batch = 0;        // batch_size × ranks
  int64_t train_samples = 0;       // used per epoch, job-wide (the sharded plan's total)
  int64_t eval_samples = 0;        // 0: no validation
  int64_t steps_per_epoch = 0;
  int64_t parameter_count = 0;
  double train_flops_per_step = 0;  // one rank's forward + backward flops of one step
  int first_epoch = 0;              // 0-based; > 0 when resumed from a checkpoint
  int64_t first_step = 0;           // global steps already done (resumed)
  // The epochs finished before a resume (from the checkpoint), for records that show the whole
  // run; null or empty for a fresh run. Valid during run_start.
  const std::vector<EpochStats>* previous_epochs = nullptr;
  // Where an observer asks the run to stop or checkpoint; valid until run_stop.
  RunControl* control = nullptr;
};

// One training step as rank 0 saw it (loss: rank 0's batch loss, not reduced).
struct StepInfo {
  int epoch = 0;              // 1-based
  int64_t step_in_epoch = 0;  // 1-based
  int64_t steps_per_epoch = 0;
  int64_t global_step = 0;  // 1-based, counting from the run's first step (resumes included)
  double loss = 0;
  double epoch_elapsed_s = 0;  // since this epoch's epoch_start
  double loss_scale = 0;       // the scale the step's gradients carried; 0 without loss scaling
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void init_start(const Config& /*config*/) {}
  virtual void staging_start() {}
  virtual void staging_stop(double /*seconds*/) {}
  virtual void init_stop(const RunFacts& /*facts*/) {}
  virtual void run_start(const RunFacts& /*facts*/) {}
  virtual void epoch_start(int /*epoch*/) {}  // 1-based
  virtual void step_end(const StepInfo& /*step*/) {}
  // The epoch's figures so far: at eval_start its training figures, at eval_stop its validation
  // figures too (validated is set).
  virtual void eval_start(const EpochStats& /*stats*/) {}
  virtual void eval_stop(const EpochStats& /*stats*/) {}
  virtual void epoch_stop(const EpochStats& /*stats*/) {}
  // Per-layer times of the run's profiled steps (empty unless profiling was on).
  virtual void layer_profile(const std::vector<OpProfile>& /*ops*/, int64_t /*profiled_steps*/) {}
  // A spatially split run's halo exchanges per split layer over the training steps (validation's
  // own exchanges left out), this rank's; sent with layer_profile.
  virtual void halo_profile(const std::vector<SpatialSplit::HaloLayer>& /*layers*/) {}
  virtual void run_stop(const TrainSummary& /*summary*/) {}
};

}  // namespace crest

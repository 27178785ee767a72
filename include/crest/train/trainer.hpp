// The training loop of `crest train`: builds the model from a Config, compiles it, and runs
// epochs of training and validation with the reference learning-rate schedule.
#pragma once
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/data/sample_source.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/built_model.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/optim/lr_policy.hpp"
#include "crest/optim/lr_schedule.hpp"
#include "crest/optim/step_lr_schedule.hpp"
#include "crest/train/config.hpp"
#include "crest/train/metric.hpp"
#include "crest/train/run_observer.hpp"

namespace crest {

struct TrainOptions {
  std::string init_weights;  // safetensors to start from (else the seeded initialisation)
  std::string save_weights;  // safetensors written at the end
  bool dry_run = false;      // build and compile only, print the summary, touch no data
  std::string timeline;      // Chrome-trace timeline of every rank (else dist.timeline)
  bool resume = false;       // continue output_dir's run from its newest checkpoint
  bool overwrite = false;  // a fresh run may delete the checkpoints of an earlier one in output_dir
  // Observers in addition to the config's (tests, benchmarks); not owned, rank 0 only.
  std::vector<RunObserver*> extra_observers;
  // The ranks that train this run, not owned (crest search: one group of the job); null: the
  // process world that dist.backend chooses.
  Communicator* communicator = nullptr;
  // Samples the caller supplies instead of the config's dataset files (crest's Python module: a
  // Python dataset). Their spec must be the dataset type's: data.sample_shape as the model reads
  // it, and its targets. Null train_samples: the config's dataset; else a null valid_samples means
  // no validation. Nothing is staged.
  std::shared_ptr<SampleSource> train_samples, valid_samples;
  // The terminal's progress bar when stdout is one (crest search turns it off: its trials'
  // bars would overwrite the study's own lines).
  bool progress_bar = true;
  // Whether the next step's batch is taken from the loader while this step's is fed (BatchAhead;
  // the loader's ring gets one batch more). Unset: where that batch is then copied to a device
  // while this step computes (BatchFeed::stage), not on host memory, where it gains nothing;
  // true: there too (tests of the path on a CPU).
  std::optional<bool> read_ahead;
};

struct EpochStats {
  int epoch = 0;          // 1-based
  double lr = 0;          // the rate of the epoch's last optimizer step
  double train_loss = 0;  // mean over the epoch's steps, incl. L2 penalty
  double val_loss = 0;
  std::vector<MetricValue> val_metrics;  // the task's metrics, in its order
  bool validated = false;                // val_loss and val_metrics hold this epoch's validation
  double seconds = 0, samples_per_s = 0;
  double train_seconds = 0;  // the training steps only (seconds includes validation)
  double data_wait_s = 0;    // time the steps waited for input batches
  // Gradient allreduce per rank (means over ranks; 0 on one rank): time the buckets'
  // allreduces ran, and the part the step waited for after backward (not hidden).
  double allreduce_s = 0, allreduce_exposed_s = 0;
  int64_t skipped = 0;     // bad samples dropped (data.on_error: skip), train + validation
  int64_t cache_hits = 0;  // training samples served from the loader's cache
  // Dynamic loss scaling (both 0 without it): the epoch's optimizer steps skipped for a gradient
  // overflow (a resumed epoch: those after the resume), and the loss scale at the epoch's end.
  int64_t overflow_steps = 0;
  double loss_scale = 0;
  // The epoch's last training micro-batch, what the DeepCAM reference logs as the epoch's
  // train_loss and train_accuracy: its loss (undivided by gradient accumulation) and the task's
  // metrics on the prediction it was trained on, means over ranks. Only for this run's records:
  // checkpoints do not keep them (a resumed run's earlier epochs have none).
  double last_batch_loss = 0;
  std::vector<MetricValue> last_batch_metrics;
  // The value of metric `short_name` ("mae"); nullopt when not measured this epoch.
  std::optional<double> val_metric(const std::string& short_name) const;
  // The same on the last training micro-batch.
  std::optional<double> last_batch_metric(const std::string& short_name) const;
};

struct TrainSummary {
  std::vector<EpochStats> epochs;
  // "success", "aborted" (stopped early without target), "preempted" (a stop signal or the time
  // budget ended it early with a checkpoint: resumable)
  std::string status = "success";
  int exit_code = 0;  // what `crest train` exits with: 0, or 128 + signal / 75 (preempted)
  // preempted: "SIGTERM", "4.0 minutes of budget left"; stopped by an observer (RunControl):
  // its reason
  std::string stop_reason;
  int64_t skipped_updates = 0;  // steps whose update train.on_nonfinite: skip left out
  int64_t overflow_steps = 0;   // steps whose update loss scaling skipped (a gradient overflow)
  int64_t steps = 0;            // training steps done by this invocation
  std::string last_checkpoint;  // the newest checkpoint written (rank 0), "" if none
  int64_t parameter_count = 0;
  size_t planned_bytes = 0;
  double stage_s = 0;  // staging to data.stage_dir before training
};

// The learning-rate schedule of the config's lr_schedule section (validated): the per-epoch family
// (lr_schedule_of), the per-step family (step_lr_schedule_of), or whichever the section uses
// behind the one interface the training loop asks (lr_policy_of; global_batch = per-rank batch
// times ranks, for the per-epoch family's scaling).
LrSchedule lr_schedule_of(const LrScheduleConfig& c);
StepLrSchedule step_lr_schedule_of(const LrScheduleConfig& c);
std::unique_ptr<LrPolicy> lr_policy_of(const LrScheduleConfig& c, int64_t global_batch);
// The samples one optimizer step averages its gradient over: data.batch_size x ranks x
// train.gradient_accumulation_frequency (what lr_schedule.scaling scales by).
int64_t effective_batch(const Config& c, int ranks);

// The network a config's model section describes: a registered model (model_registry.hpp) built
// from its section, or a graph given as layers: (outputs[0] is the prediction). Defined in
// build_model.cpp.
BuiltModel build_model(const ModelConfig& m);

// Compute threads of one rank: crest.threads, or this node's cores shared among its
// `local_ranks` ranks.
int compute_threads_per_rank(const Config& config, int local_ranks);
// What one rank's program may plan (crest.max_memory_gb; by default the node's available memory
// over its `local_ranks`), with the sentence that says so; 0 bytes when it cannot be known.
struct MemoryLimit {
  size_t bytes = 0;
  std::string source;
  bool set = false;  // by crest.max_memory_gb (SessionOptions::memory_limit_set)
};
MemoryLimit memory_limit_per_rank(const Config& config, int local_ranks);

// Runs `crest train`. Progress goes to `log`. Throws crest::Error on bad input.
TrainSummary run_training(const Config& config, const TrainOptions& options, std::ostream& log);

}  // namespace crest

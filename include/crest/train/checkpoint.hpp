// Checkpoints: everything a run needs to continue exactly where it stopped.
//
// One checkpoint is one checkpoint file (crest/engine/checkpoint_file.hpp: the parameters, the
// optimizer's state, a checksum), output_dir/checkpoints/ckpt-<global step>.safetensors, whose
// metadata this run adds to: crest version, position (epoch, step in epoch, global step), the
// dropout counter, optimizer steps, the loss scaler's state, early-stopping state, the finished
// epochs' figures, ranks and the resolved config.
// Shuffling needs no saved state: an epoch's order is a function of (data.seed, epoch), so the
// data position is the epoch and the steps done in it.
//
// Writing is atomic (temp file, fsync, rename, then the directory fsync'ed): a kill or a full
// disk during a write leaves every earlier checkpoint as it was. Only after the new file is in
// place are the oldest ones beyond `keep` removed.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "crest/engine/checkpoint_file.hpp"
#include "crest/engine/whole_parts.hpp"
#include "crest/graph/param_store.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/optim/optimizer.hpp"
#include "crest/train/trainer.hpp"

namespace crest {

// Where a run stands between two steps.
struct TrainingPosition {
  int epoch = 0;                // 0-based: the epoch in progress (or the next one)
  int64_t step_in_epoch = 0;    // steps of `epoch` already done
  int64_t global_step = 0;      // steps done since the run began
  uint64_t executor_steps = 0;  // the executor's dropout counter (Executor::training_steps)
  int64_t optimizer_steps = 0;
  double epoch_loss_sum = 0;  // this rank's summed step losses of the partial epoch
  double best_val_loss = std::numeric_limits<double>::infinity();  // early stopping
  int epochs_since_best = 0;
  std::string status;  // set when the run ended: "success", "aborted"; empty while it runs
  // Rollbacks after non-finite values so far (train.on_nonfinite: rollback): each one changes
  // the data order (the loader's seed), so a resume must keep the count.
  int rollbacks = 0;
  // Dynamic loss scaling (train.loss_scaling): optimizer steps skipped for a gradient overflow
  // so far, which count in the learning-rate schedule's position (trainer.cpp: schedule_step),
  // and the scaler's state (scale 0: the run had no scaler, or the checkpoint is older).
  int64_t overflow_steps = 0;
  LossScalerState loss_scaler;
};

struct CheckpointInfo {
  TrainingPosition position;
  std::vector<EpochStats> history;  // the finished epochs
  int ranks = 1;
  int64_t batch_size = 0;  // per rank
  int64_t steps_per_epoch = 0;
  std::string optimizer;    // Optimizer::name()
  std::string config_yaml;  // Config::resolved_yaml of the run that wrote it
  std::string crest_version;
};

// Writes a checkpoint of `params` and `optimizer` into `dir` (created if needed) atomically,
// then keeps only the newest `keep` checkpoints there. Returns the new file's path. Throws
// crest::Error naming the file on any failure (disk full, permissions); earlier checkpoints are
// untouched then. Test hooks: with CREST_TEST_KILL_DURING_CHECKPOINT=N in the environment the
// process kills itself (SIGKILL) half-way through writing its N-th checkpoint; with
// CREST_TEST_CHECKPOINT_WRITE_FAILS=N that write fails there as on a full disk. Divided
// parameters (a spatially split dense head) are written whole, from `wholes`.
std::string write_checkpoint(const std::string& dir, const CheckpointInfo& info,
                             const ParamStore& params, Optimizer& optimizer, int keep,
                             const WholeParts& wholes = {});
// The same for a model laid out as `layout` (its buffers need not exist here) whose optimizer
// keeps `states`, asking `bytes` for each tensor as the file takes it (SavedState::provide).
std::string write_checkpoint(const std::string& dir, const CheckpointInfo& info,
                             const ParamStore& layout, const std::vector<std::string>& states,
                             const checkpoint_file::StateBytes& bytes, int keep);

// Checkpoint files in `dir`, oldest first (by the global step in their names). Temporary files
// of interrupted writes are not checkpoints and are not listed.
std::vector<std::string> list_checkpoints(const std::string& dir);

// Reads and verifies `path` completely (format, checksum, every tensor's name, dtype and shape
// against `params` and `optimizer`) before changing anything; then loads parameters and
// optimizer state and returns the rest. Throws crest::Error (input) naming the file and the
// defect: truncated, corrupt, not a crest checkpoint, another model.
// With `wholes`, divided parameters' whole tensors are kept there (checkpoint_file::load).
CheckpointInfo read_checkpoint(const std::string& path, ParamStore& params, Optimizer& optimizer,
                               WholeParts* wholes = nullptr);

// Opens and verifies `path` as read_checkpoint does (format, checksum, optimizer, every tensor)
// for a model laid out as `layout` (its buffers need not exist) whose optimizer `optimizer`
// keeps `states`, loading nothing: a pipeline's rank 0 sends each stage its tensors from it.
struct VerifiedCheckpoint {
  SafetensorsFile file;
  CheckpointInfo info;
};
VerifiedCheckpoint verify_checkpoint(const std::string& path, const ParamStore& layout,
                                     const std::vector<std::string>& states,
                                     const std::string& optimizer);

// The metadata alone (no model needed), verified by checksum: for `crest inspect` and for
// comparing configs before the model is built.
CheckpointInfo read_checkpoint_info(const std::string& path);

}  // namespace crest

#include "resume.hpp"

#include <functional>
#include <optional>

#include "crest/core/error.hpp"
#include "crest/engine/pipeline_training_session.hpp"
#include "crest/engine/whole_parts.hpp"

namespace crest {
namespace {

// Rank 0's position to every rank, as one fixed-size message.
void broadcast_position(Communicator& comm, TrainingPosition& pos) {
  struct {
    int64_t epoch, step_in_epoch, global_step, optimizer_steps, since_best, rollbacks,
        overflow_steps, clean_steps;
    uint64_t executor_steps;
    double epoch_loss_sum, best_val_loss, loss_scale;
  } p{pos.epoch,           pos.step_in_epoch,           pos.global_step,
      pos.optimizer_steps, pos.epochs_since_best,       pos.rollbacks,
      pos.overflow_steps,  pos.loss_scaler.clean_steps, pos.executor_steps,
      pos.epoch_loss_sum,  pos.best_val_loss,           pos.loss_scaler.scale};
  comm.broadcast(&p, sizeof p, 0);
  pos.epoch = static_cast<int>(p.epoch);
  pos.step_in_epoch = p.step_in_epoch;
  pos.global_step = p.global_step;
  pos.optimizer_steps = p.optimizer_steps;
  pos.epochs_since_best = static_cast<int>(p.since_best);
  pos.executor_steps = p.executor_steps;
  pos.epoch_loss_sum = comm.rank() == 0 ? p.epoch_loss_sum : 0;  // saved as the job's sum
  pos.best_val_loss = p.best_val_loss;
  pos.rollbacks = static_cast<int>(p.rollbacks);
  pos.overflow_steps = p.overflow_steps;
  pos.loss_scaler = {p.loss_scale, p.clean_steps};
}

// An open accumulation window's partial gradient sum carries the loss scale it was summed with:
// it can go on only under the same scaling (the scaler takes the checkpoint's scale).
std::string loss_scaling_problem(const TrainingPosition& pos, const Config& config,
                                 bool scaling_now) {
  const bool window_open = pos.global_step % config.train.gradient_accumulation_frequency != 0;
  const bool scaled_then = pos.loss_scaler.scale > 0;
  if (!window_open || scaled_then == scaling_now) return "";
  return "the checkpoint stopped inside an accumulation window whose partial gradient sum was " +
         std::string(scaled_then ? "" : "not ") + "loss-scaled; train.loss_scaling must stay " +
         (scaled_then ? "dynamic" : "off") + " to continue it";
}

// Rank 0 verifies that the checkpoint can continue this job, then `read`s it (verified
// completely before anything changes); every rank throws its problem.
TrainingPosition read_on_rank0(const RunDirectory& run_dir, const Config& config,
                               Communicator& comm, int shards, bool scaling,
                               int64_t steps_per_epoch,
                               const std::function<CheckpointInfo(const std::string&)>& read,
                               std::vector<EpochStats>& history) {
  TrainingPosition pos;
  std::string problem;
  if (comm.rank() == 0) {
    try {
      problem = resume_position_problem(*run_dir.resume_info, config, shards, steps_per_epoch);
      if (problem.empty())
        problem = loss_scaling_problem(run_dir.resume_info->position, config, scaling);
      if (problem.empty()) {
        const CheckpointInfo info = read(run_dir.resume_from);
        pos = info.position;
        history = info.history;
      } else {
        problem = run_dir.resume_from + ": " + problem;
      }
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  fail_with_rank0(comm, problem);
  broadcast_position(comm, pos);
  return pos;
}

// Every rank's scaler takes the checkpoint's state (broadcast with the position).
void restore_scaler(LossScaler* scaler, const TrainingPosition& pos) {
  if (scaler && pos.loss_scaler.scale > 0)
    scaler->restore(pos.loss_scaler);
  else if (scaler)
    scaler->reset();  // the checkpoint's run had no scaler
}

}  // namespace

TrainingPosition resume_from_checkpoint(const RunDirectory& run_dir, const Config& config,
                                        Communicator& comm, int shards, GradientSync& sync,
                                        Executor& ex, Optimizer& optimizer, LossScaler* scaler,
                                        int64_t steps_per_epoch, std::vector<EpochStats>& history) {
  WholeParts wholes;  // a spatially split dense head's tensors, read whole by rank 0
  TrainingPosition pos = read_on_rank0(
      run_dir, config, comm, shards, scaler != nullptr, steps_per_epoch,
      [&](const std::string& path) {
        return read_checkpoint(path, ex.params(), optimizer, &wholes);
      },
      history);
  if (ex.params().divided()) scatter_parts(ex.params(), &optimizer, wholes);
  sync.broadcast_parameters(ex.params());
  for (auto& [name, buffer] : optimizer.state())
    broadcast_store_layout(comm, ex.params(), buffer->data(), buffer->bytes());
  optimizer.set_steps_taken(pos.optimizer_steps);
  ex.set_training_steps(pos.executor_steps);
  restore_scaler(scaler, pos);
  return pos;
}

TrainingPosition resume_pipeline_from_checkpoint(const RunDirectory& run_dir, const Config& config,
                                                 Communicator& comm, PipelineTrainingSession& p,
                                                 int64_t steps_per_epoch,
                                                 std::vector<EpochStats>& history) {
  // Rank 0 keeps the verified file open and sends each stage its tensors from it.
  std::optional<SafetensorsFile> file;
  SavedState& saved = p.saved_state();
  TrainingPosition pos = read_on_rank0(
      run_dir, config, comm, p.ranks().replicas, p.scaler() != nullptr, steps_per_epoch,
      [&](const std::string& path) {
        VerifiedCheckpoint v = verify_checkpoint(path, saved.layout(), saved.optimizer_states(),
                                                 saved.optimizer_name());
        file = std::move(v.file);
        return v.info;
      },
      history);
  restore_scaler(p.scaler(), pos);
  p.load_state(file ? &*file : nullptr);
  // The counters are the position's: the step counter (dropout's masks) and Adam's steps.
  p.executor().set_training_steps(pos.executor_steps);
  p.optimizer().set_steps_taken(pos.optimizer_steps);
  return pos;
}

}  // namespace crest

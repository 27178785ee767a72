#include "checkpointer.hpp"

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <ostream>

#include "crest/core/error.hpp"
#include "crest/core/units.hpp"

namespace crest {

Checkpointer::Checkpointer(const Config& config, CheckpointContext context, SavedState& state,
                           const LossScaler* scaler, std::ostream& log)
    : config_(config), context_(std::move(context)), state_(state), scaler_(scaler), log_(log) {}

bool Checkpointer::due_after_step(int64_t global_step) const {
  const TrainConfig& tc = config_.train;
  return tc.checkpoint_every_steps && tc.checkpoint_every > 0 &&
         global_step % tc.checkpoint_every == 0;
}

bool Checkpointer::due_after_epoch(int epoch) const {
  const TrainConfig& tc = config_.train;
  return tc.checkpoint_every > 0 && !tc.checkpoint_every_steps &&
         (epoch + 1) % tc.checkpoint_every == 0;
}

void Checkpointer::write(TrainingPosition at, const std::vector<EpochStats>& history) {
  if (context_.dir.empty()) return;
  CheckpointInfo info;
  info.position = std::move(at);
  info.position.executor_steps = state_.executor_steps();
  info.position.optimizer_steps = state_.optimizer_steps();
  info.position.loss_scaler = scaler_ ? scaler_->state() : LossScalerState{};
  info.history = history;
  info.ranks = context_.ranks;
  info.batch_size = context_.batch_size;
  info.steps_per_epoch = context_.steps_per_epoch;
  info.optimizer = state_.optimizer_name();
  info.config_yaml = config_.resolved_yaml;
  info.crest_version = CREST_VERSION;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    // Every rank is here: rank 0 writes what it holds and what the others send it.
    state_.provide(/*with_optimizer=*/true, [&](const checkpoint_file::StateBytes& bytes) {
      last_ = write_checkpoint(context_.dir, info, state_.layout(), state_.optimizer_states(),
                               bytes, config_.train.checkpoint_keep);
    });
    if (!context_.writer) return;
    last_failed_ = false;
  } catch (const Error& e) {
    // The write is atomic: whatever failed (ENOSPC, EDQUOT, EIO, a short write), the earlier
    // checkpoints are as they were, and the log says which one a resume would use.
    last_failed_ = true;
    const std::string fallback = newest_valid();
    const std::string resume_uses = fallback.empty() ? "no checkpoint yet: a resume is not possible"
                                                     : "a resume would use " + fallback;
    if (config_.train.checkpoint_failures == CheckpointFailures::stop)
      throw Error(e.kind(),
                  std::string(e.what()) + "; " + resume_uses +
                      " (train.checkpoint_failures: tolerate goes on training instead)",
                  e.scope());
    ++failures_;
    log_ << "checkpoint failed: " << e.what() << "; training goes on and the next checkpoint is "
         << "tried at the next interval (train.checkpoint_failures: tolerate); " << resume_uses
         << "\n";
    return;
  }
  // Its size and time: what checkpointing costs the run (fsync included).
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(last_, ec);
  log_ << "checkpoint: " << last_ << " (" << human_bytes(static_cast<double>(ec ? 0 : bytes))
       << ", " << std::fixed << std::setprecision(2) << seconds << " s)\n";
}

std::string Checkpointer::newest_valid() const {
  const auto existing = list_checkpoints(context_.dir);
  return existing.empty() ? "" : existing.back();
}

}  // namespace crest

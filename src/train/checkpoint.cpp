#include "crest/train/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <sstream>

#include "checkpoint_info.hpp"
#include "crest/core/error.hpp"
#include "crest/engine/checkpoint_file.hpp"

namespace crest {
namespace fs = std::filesystem;

namespace {

// Test hooks (see the header): half-way through the N-th checkpoint write of this process, die,
// or fail as on a full disk.
std::function<void(size_t, size_t)> test_hook(const std::string& path) {
  static int writes = 0;
  ++writes;
  auto asks = [](const char* hook) {
    const char* n = std::getenv(hook);
    return n && std::atoi(n) == writes;
  };
  if (asks("CREST_TEST_KILL_DURING_CHECKPOINT"))
    return [](size_t written, size_t total) {
      if (written * 2 >= total) ::raise(SIGKILL);
    };
  if (asks("CREST_TEST_CHECKPOINT_WRITE_FAILS"))
    return [path](size_t written, size_t total) {
      if (written * 2 >= total) throw_io(path, "write failed", ENOSPC);
    };
  return {};
}

// Doubles as C99 hex floats: exact, so a resumed run continues from the very same bits.
std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// An epoch's validation metrics as one field: "mae=<exact>,mse=<exact>", "-" for none.
std::string metrics_text(const std::vector<MetricValue>& metrics) {
  std::string out;
  for (const MetricValue& m : metrics)
    out += (out.empty() ? "" : ",") + m.name + "=" + exact(m.value);
  return out.empty() ? "-" : out;
}

// One finished epoch per line, every field exact.
std::string history_text(const std::vector<EpochStats>& history) {
  std::ostringstream o;
  for (const EpochStats& e : history)
    o << e.epoch << ' ' << exact(e.lr) << ' ' << exact(e.train_loss) << ' ' << (e.validated ? 1 : 0)
      << ' ' << exact(e.val_loss) << ' ' << metrics_text(e.val_metrics) << ' ' << exact(e.seconds)
      << ' ' << exact(e.samples_per_s) << ' ' << exact(e.train_seconds) << ' '
      << exact(e.data_wait_s) << ' ' << exact(e.allreduce_s) << ' ' << exact(e.allreduce_exposed_s)
      << ' ' << e.skipped << ' ' << e.cache_hits << '\n';
  return o.str();
}

}  // namespace

std::vector<std::string> list_checkpoints(const std::string& dir) {
  return checkpoint_file::list(dir);
}

namespace {

// Every field of the checkpoint's metadata but "format" and "checksum" (the file's own).
checkpoint_file::Metadata metadata_of(const CheckpointInfo& info) {
  const TrainingPosition& pos = info.position;
  return {
      {"crest_version", info.crest_version},
      {"epoch", std::to_string(pos.epoch)},
      {"step_in_epoch", std::to_string(pos.step_in_epoch)},
      {"global_step", std::to_string(pos.global_step)},
      {"executor_steps", std::to_string(pos.executor_steps)},
      {"optimizer_steps", std::to_string(pos.optimizer_steps)},
      {"epoch_loss_sum", exact(pos.epoch_loss_sum)},
      {"best_val_loss", exact(pos.best_val_loss)},
      {"epochs_since_best", std::to_string(pos.epochs_since_best)},
      {"status", pos.status},
      {"rollbacks", std::to_string(pos.rollbacks)},
      {"loss_scale", exact(pos.loss_scaler.scale)},
      {"loss_scale_clean_steps", std::to_string(pos.loss_scaler.clean_steps)},
      {"overflow_steps", std::to_string(pos.overflow_steps)},
      {"history", history_text(info.history)},
      {"ranks", std::to_string(info.ranks)},
      {"batch_size", std::to_string(info.batch_size)},
      {"steps_per_epoch", std::to_string(info.steps_per_epoch)},
      {"optimizer", info.optimizer},
      {"config", info.config_yaml},
  };
}

}  // namespace

std::string write_checkpoint(const std::string& dir, const CheckpointInfo& info,
                             const ParamStore& layout, const std::vector<std::string>& states,
                             const checkpoint_file::StateBytes& bytes, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_input(dir + ": cannot create the checkpoint directory: " + ec.message());
  const std::string path = checkpoint_file::path_for_step(dir, info.position.global_step);
  checkpoint_file::write(path, metadata_of(info), layout, states, bytes, test_hook(path));

  // Only now, with the new one in place, drop the oldest beyond `keep`.
  const auto all = list_checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 1)) < all.size(); ++i)
    fs::remove(all[i], ec);
  return path;
}

std::string write_checkpoint(const std::string& dir, const CheckpointInfo& info,
                             const ParamStore& params, Optimizer& optimizer, int keep,
                             const WholeParts& wholes) {
  std::string path;
  checkpoint_file::with_host_bytes(
      params, &optimizer, wholes, [&](const checkpoint_file::StateBytes& bytes) {
        path = write_checkpoint(dir, info, params, checkpoint_file::state_names(optimizer), bytes,
                                keep);
      });
  return path;
}

namespace {

void check_optimizer(const std::string& path, const CheckpointInfo& info,
                     const std::string& optimizer) {
  if (info.optimizer != optimizer)
    checkpoint_file::defect(path, "checkpoint holds the state of optimizer '" + info.optimizer +
                                      "', this run uses '" + optimizer +
                                      "' (optimizer.name cannot change on resume)");
}

}  // namespace

CheckpointInfo read_checkpoint(const std::string& path, ParamStore& params, Optimizer& optimizer,
                               WholeParts* wholes) {
  const SafetensorsFile file = checkpoint_file::open_verified(path);
  CheckpointInfo info = checkpoint_info_of(file);
  check_optimizer(path, info, optimizer.name());
  checkpoint_file::load(file, params, optimizer, wholes);
  optimizer.set_steps_taken(info.position.optimizer_steps);
  return info;
}

VerifiedCheckpoint verify_checkpoint(const std::string& path, const ParamStore& layout,
                                     const std::vector<std::string>& states,
                                     const std::string& optimizer) {
  SafetensorsFile file = checkpoint_file::open_verified(path);
  CheckpointInfo info = checkpoint_info_of(file);
  check_optimizer(path, info, optimizer);
  checkpoint_file::check_layout(file, layout, states);
  return {std::move(file), std::move(info)};
}

}  // namespace crest

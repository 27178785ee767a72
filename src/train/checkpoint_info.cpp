// A training run's checkpoint metadata read back, each field checked to parse. Kept apart from
// writing and loading (checkpoint.cpp), which need a model and an optimizer, so that `crest
// inspect`'s path and the fuzz harness (tests/fuzz) link only this, the checkpoint file's
// verification (src/engine/checkpoint_file.cpp) and the safetensors reader.
#include "checkpoint_info.hpp"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "crest/core/error.hpp"
#include "crest/engine/checkpoint_file.hpp"

namespace crest {

using checkpoint_file::defect;

namespace {

double parse_double(const std::string& path, const std::string& key, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    defect(path, "checkpoint field '" + key + "' is not a number: '" + text + "'");
  return v;
}

int64_t parse_int(const std::string& path, const std::string& key, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < 0)
    defect(path, "checkpoint field '" + key + "' is not a count: '" + text + "'");
  return v;
}

// metrics_text read back. Checkpoints of crest versions before metrics were named hold only the
// validation MAE there, as a plain number.
std::vector<MetricValue> parse_metrics(const std::string& path, const std::string& text) {
  std::vector<MetricValue> out;
  if (text == "-") return out;
  if (text.find('=') == std::string::npos) return {{"mae", parse_double(path, "history", text)}};
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == 0 || eq == std::string::npos)
      defect(path, "checkpoint field 'history' has a malformed metric: '" + item + "'");
    out.push_back({item.substr(0, eq), parse_double(path, "history", item.substr(eq + 1))});
  }
  return out;
}

std::vector<EpochStats> parse_history(const std::string& path, const std::string& text) {
  std::vector<EpochStats> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string v[14];
    for (auto& x : v) f >> x;
    std::string extra;
    if (v[13].empty() || (f >> extra))
      defect(path, "checkpoint field 'history' has a malformed line: '" + line + "'");
    EpochStats e;
    e.epoch = static_cast<int>(parse_int(path, "history", v[0]));
    e.lr = parse_double(path, "history", v[1]);
    e.train_loss = parse_double(path, "history", v[2]);
    e.validated = v[3] == "1";
    e.val_loss = parse_double(path, "history", v[4]);
    e.val_metrics = parse_metrics(path, v[5]);
    e.seconds = parse_double(path, "history", v[6]);
    e.samples_per_s = parse_double(path, "history", v[7]);
    e.train_seconds = parse_double(path, "history", v[8]);
    e.data_wait_s = parse_double(path, "history", v[9]);
    e.allreduce_s = parse_double(path, "history", v[10]);
    e.allreduce_exposed_s = parse_double(path, "history", v[11]);
    e.skipped = parse_int(path, "history", v[12]);
    e.cache_hits = parse_int(path, "history", v[13]);
    out.push_back(e);
  }
  return out;
}

}  // namespace

namespace {

const std::string& field(const SafetensorsFile& file, const std::string& key) {
  const auto it = file.metadata().find(key);
  if (it == file.metadata().end()) defect(file.path(), "checkpoint metadata lacks '" + key + "'");
  return it->second;
}

}  // namespace

CheckpointInfo checkpoint_info_of(const SafetensorsFile& file) {
  const std::string& p = file.path();
  CheckpointInfo info;
  TrainingPosition& pos = info.position;
  pos.epoch = static_cast<int>(parse_int(p, "epoch", field(file, "epoch")));
  pos.step_in_epoch = parse_int(p, "step_in_epoch", field(file, "step_in_epoch"));
  pos.global_step = parse_int(p, "global_step", field(file, "global_step"));
  pos.executor_steps =
      static_cast<uint64_t>(parse_int(p, "executor_steps", field(file, "executor_steps")));
  pos.optimizer_steps = parse_int(p, "optimizer_steps", field(file, "optimizer_steps"));
  pos.epoch_loss_sum = parse_double(p, "epoch_loss_sum", field(file, "epoch_loss_sum"));
  pos.best_val_loss = parse_double(p, "best_val_loss", field(file, "best_val_loss"));
  pos.epochs_since_best =
      static_cast<int>(parse_int(p, "epochs_since_best", field(file, "epochs_since_best")));
  pos.status = field(file, "status");
  // Written since train.on_nonfinite: rollback; older checkpoints had none.
  if (const auto it = file.metadata().find("rollbacks"); it != file.metadata().end())
    pos.rollbacks = static_cast<int>(parse_int(p, "rollbacks", it->second));
  // Written since dynamic loss scaling; older checkpoints had none (the scaler then starts at
  // train.loss_scale_initial, and no step was skipped for an overflow).
  if (const auto it = file.metadata().find("loss_scale"); it != file.metadata().end()) {
    const double scale = parse_double(p, "loss_scale", it->second);
    if (scale != 0 && !(scale >= LossScaler::kMinScale && scale <= LossScaler::kMaxScale))
      defect(p, "checkpoint field 'loss_scale' is not a loss scale: '" + it->second + "'");
    pos.loss_scaler.scale = scale;
    pos.loss_scaler.clean_steps =
        parse_int(p, "loss_scale_clean_steps", field(file, "loss_scale_clean_steps"));
    pos.overflow_steps = parse_int(p, "overflow_steps", field(file, "overflow_steps"));
  }
  info.history = parse_history(p, field(file, "history"));
  info.ranks = static_cast<int>(parse_int(p, "ranks", field(file, "ranks")));
  info.batch_size = parse_int(p, "batch_size", field(file, "batch_size"));
  info.steps_per_epoch = parse_int(p, "steps_per_epoch", field(file, "steps_per_epoch"));
  info.optimizer = field(file, "optimizer");
  info.config_yaml = field(file, "config");
  info.crest_version = field(file, "crest_version");
  return info;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return checkpoint_info_of(checkpoint_file::open_verified(path));
}

}  // namespace crest

#include "crest/train/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "checkpoint_format.hpp"
#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/data/formats/crc32c.hpp"
#include "crest/data/safetensors.hpp"

namespace crest {
namespace fs = std::filesystem;

using checkpoint_format::content_crc;
using checkpoint_format::crc_text;
using checkpoint_format::defect;
using checkpoint_format::info_of;
using checkpoint_format::kFormat;
using checkpoint_format::open_verified;

namespace {

constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".safetensors";

// Doubles as C99 hex floats: exact, so a resumed run continues from the very same bits.
std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// Every tensor of a checkpoint, by its file name: model/<param>, optimizer/<state>/<param>,
// pointing into host views of the parameter values and each optimizer state buffer (the buffers
// themselves on host memory, copies elsewhere).
struct HostTensors {
  std::vector<HostStaging> buffers;
  std::vector<SafetensorsEntry> entries;
  void commit() {
    for (HostStaging& b : buffers) b.commit();
  }
};

// `writable`: the entries will be loaded into, then commit() copies them back.
HostTensors host_tensors(const ParamStore& params, Optimizer& optimizer, bool writable) {
  HostTensors out;
  const auto states = optimizer.state();
  out.buffers.reserve(1 + states.size());
  auto stage = [&](void* data, size_t bytes) -> const std::byte* {
    if (writable)
      out.buffers.emplace_back(params.memory(), data, bytes);
    else
      out.buffers.emplace_back(params.memory(), static_cast<const void*>(data), bytes);
    return static_cast<const std::byte*>(out.buffers.back().data());
  };
  const std::byte* values = stage(params.values(), params.bytes());
  for (const ParamSlot& slot : params.slots())
    out.entries.push_back({"model/" + slot.name, params.dtype(), slot.shape, values + slot.offset});
  for (const auto& [state, buffer] : states) {
    const std::byte* data = stage(buffer->data(), buffer->bytes());
    for (const ParamSlot& slot : params.slots())
      if (slot.spec.trainable)
        out.entries.push_back({"optimizer/" + state + "/" + slot.name, params.dtype(), slot.shape,
                               data + slot.offset});
  }
  return out;
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

// The global step in a checkpoint's file name, or -1 when it is not one.
int64_t step_of(const fs::path& p) {
  const std::string name = p.filename().string();
  const std::string pre = kPrefix, suf = kSuffix;
  if (name.size() <= pre.size() + suf.size() || name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - suf.size(), suf.size(), suf) != 0)
    return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - suf.size());
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return -1;
  return std::stoll(digits);
}

}  // namespace

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of(entry.path());
    if (step >= 0 && entry.is_regular_file(ec)) found.push_back({step, entry.path().string()});
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string write_checkpoint(const std::string& dir, const CheckpointInfo& info,
                             const ParamStore& params, Optimizer& optimizer, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_input(dir + ": cannot create the checkpoint directory: " + ec.message());
  char name[64];
  std::snprintf(name, sizeof name, "%s%012lld%s", kPrefix,
                static_cast<long long>(info.position.global_step), kSuffix);
  const std::string path = (fs::path(dir) / name).string();

  const TrainingPosition& pos = info.position;
  std::map<std::string, std::string> md = {
      {"format", kFormat},
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
  const HostTensors host = host_tensors(params, optimizer, /*writable=*/false);
  const std::vector<SafetensorsEntry>& entries = host.entries;
  std::vector<std::pair<std::string, std::pair<const void*, size_t>>> tensors;
  for (const auto& e : entries)
    tensors.push_back(
        {e.name, {e.data, static_cast<size_t>(e.shape.numel()) * dtype_size(e.dtype)}});
  md["checksum"] = crc_text(content_crc(md, tensors));

  // Test hook (see the header): die half-way through the N-th checkpoint write of this process.
  static int writes = 0;
  ++writes;
  std::function<void(size_t, size_t)> hook;
  if (const char* n = std::getenv("CREST_TEST_KILL_DURING_CHECKPOINT"); n && std::atoi(n) == writes)
    hook = [](size_t written, size_t total) {
      if (written * 2 >= total) ::raise(SIGKILL);
    };
  write_safetensors(path, entries, md, hook);

  // Only now, with the new one in place, drop the oldest beyond `keep`.
  const auto all = list_checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 1)) < all.size(); ++i)
    fs::remove(all[i], ec);
  return path;
}

CheckpointInfo read_checkpoint(const std::string& path, ParamStore& params, Optimizer& optimizer) {
  const SafetensorsFile file = open_verified(path);
  CheckpointInfo info = info_of(file);
  if (info.optimizer != optimizer.name())
    defect(path, "checkpoint holds the state of optimizer '" + info.optimizer +
                     "', this run uses '" + optimizer.name() +
                     "' (optimizer.name cannot change on resume)");
  // Verify every tensor (names, dtypes, shapes, nothing extra) before loading any.
  HostTensors host = host_tensors(params, optimizer, /*writable=*/true);
  const std::vector<SafetensorsEntry>& entries = host.entries;
  for (const auto& e : entries) {
    const SafetensorsTensor* t = file.find(e.name);
    if (!t)
      defect(path,
             "checkpoint lacks '" + e.name + "' " + e.shape.str() +
                 " (was it written for another model? model settings cannot change on resume)");
    if (t->dtype != to_safetensors_dtype(e.dtype) || t->shape != e.shape.to_vector())
      defect(path, "checkpoint tensor '" + e.name + "' is " + safetensors_dtype_name(t->dtype) +
                       " " + t->crest_shape().str() + ", this model needs " +
                       safetensors_dtype_name(to_safetensors_dtype(e.dtype)) + " " + e.shape.str());
  }
  if (file.tensors().size() != entries.size()) {
    for (const auto& t : file.tensors()) {
      const bool known = std::any_of(entries.begin(), entries.end(),
                                     [&](const auto& e) { return e.name == t.name; });
      if (!known) defect(path, "checkpoint tensor '" + t.name + "' is not part of this model");
    }
  }
  for (const auto& e : entries) file.read_into(e.name, e.dtype, e.shape, const_cast<void*>(e.data));
  host.commit();
  optimizer.set_steps_taken(info.position.optimizer_steps);
  return info;
}

}  // namespace crest

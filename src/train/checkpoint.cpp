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

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/data/formats/crc32c.hpp"
#include "crest/data/safetensors.hpp"

namespace crest {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "crest checkpoint 1";
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

// CRC32C over the metadata (but the checksum itself) and every tensor's bytes, in name order.
uint32_t content_crc(const std::map<std::string, std::string>& metadata,
                     std::vector<std::pair<std::string, std::pair<const void*, size_t>>> tensors) {
  uint32_t crc = 0;
  for (const auto& [k, v] : metadata) {
    if (k == "checksum") continue;
    crc = crc32c(k.data(), k.size() + 0, crc);
    crc = crc32c("=", 1, crc);
    crc = crc32c(v.data(), v.size(), crc);
    crc = crc32c("\n", 1, crc);
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [name, data] : tensors) {
    crc = crc32c(name.data(), name.size(), crc);
    crc = crc32c(data.first, data.second, crc);
  }
  return crc;
}

std::string crc_text(uint32_t crc) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "crc32c:%08x", crc);
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

[[noreturn]] void defect(const std::string& path, const std::string& what) {
  throw_input(path + ": " + what);
}

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

// Opens `path` as a crest checkpoint: a valid safetensors file of our format whose checksum
// matches. Everything else about it is checked by the callers.
SafetensorsFile open_verified(const std::string& path) {
  if (!fs::exists(path)) defect(path, "no such checkpoint file");
  SafetensorsFile file = [&] {
    try {
      return SafetensorsFile(path);
    } catch (const Error& e) {
      // The safetensors reader names the file and the structural defect (truncated, bad header).
      throw Error(e.kind(), std::string(e.what()) + " (not a readable crest checkpoint)");
    }
  }();
  const auto& md = file.metadata();
  const auto format = md.find("format");
  if (format == md.end() || format->second != kFormat)
    defect(path, "not a crest checkpoint (metadata 'format' is " +
                     (format == md.end() ? std::string("missing") : "'" + format->second + "'") +
                     ", expected '" + kFormat + "')");
  const auto sum = md.find("checksum");
  if (sum == md.end()) defect(path, "checkpoint has no checksum");
  std::vector<std::pair<std::string, std::pair<const void*, size_t>>> tensors;
  for (const auto& t : file.tensors()) tensors.push_back({t.name, {t.data, t.bytes}});
  const std::string actual = crc_text(content_crc(md, tensors));
  if (actual != sum->second)
    defect(path, "checkpoint is corrupt: content checksum is " + actual + ", the file says " +
                     sum->second);
  return file;
}

const std::string& field(const SafetensorsFile& file, const std::string& key) {
  const auto it = file.metadata().find(key);
  if (it == file.metadata().end()) defect(file.path(), "checkpoint metadata lacks '" + key + "'");
  return it->second;
}

CheckpointInfo info_of(const SafetensorsFile& file) {
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
  info.history = parse_history(p, field(file, "history"));
  info.ranks = static_cast<int>(parse_int(p, "ranks", field(file, "ranks")));
  info.batch_size = parse_int(p, "batch_size", field(file, "batch_size"));
  info.steps_per_epoch = parse_int(p, "steps_per_epoch", field(file, "steps_per_epoch"));
  info.optimizer = field(file, "optimizer");
  info.config_yaml = field(file, "config");
  info.crest_version = field(file, "crest_version");
  return info;
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

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return info_of(open_verified(path));
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

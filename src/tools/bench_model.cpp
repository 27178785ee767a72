#include "bench_model.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <tuple>

#include "crest/core/bf16.hpp"
#include "crest/core/cpus.hpp"
#include "crest/core/fp16.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/core/name_registry.hpp"
#include "crest/models/model_registry.hpp"
#include "crest/optim/optimizer_registry.hpp"

namespace crest::tools {

SessionOptions bench_session_options(const BenchRunArgs& a, Purpose purpose, int64_t batch,
                                     int local_ranks) {
  SessionOptions so;
  so.backend = a.backend;
  so.threads = a.threads > 0 ? a.threads : default_threads_per_rank(local_ranks);
  if (a.autotune) so.layout_tuning.emplace().measure = true;
  so.purpose = purpose;
  so.precision = parse_enum<Precision>(a.precision, "--precision");
  so.batch = batch;
  return so;
}

OptimizerConfig bench_optimizer_config(const std::string& model, const std::string& optimizer) {
  OptimizerConfig o;
  const std::string name =
      optimizer.empty() ? find_model_kind(model).reference_optimizer : optimizer;
  o.name = registered_optimizer_spelling(name);
  if (o.name.empty()) {
    throw_usage("bench: --optimizer: unknown optimizer '" + name +
                "' (registered: " + join_names(optimizer_names()) + ")");
  }
  if (const auto& defaults = find_optimizer_type(o.name).set_defaults) defaults(o);
  if (o.takes("momentum")) o.momentum = 0.9;
  return o;
}

namespace {

// DeepCAM and the Tiramisu read the climate fields: 16 channels at --height x --width.
bool reads_climate_fields(const std::string& model) {
  return model == "deepcam" || model == "tiramisu";
}

// The models whose samples are images (--height x --width) rather than CosmoFlow's cubes.
bool reads_images(const std::string& model) {
  return reads_climate_fields(model) || model == "resnet50";
}

}  // namespace

std::pair<int64_t, int64_t> image_size(const BenchModelArgs& a) {
  const bool imagenet = a.model == "resnet50";
  return {a.height > 0 ? a.height
          : imagenet   ? 224
                       : 768,
          a.width > 0 ? a.width
          : imagenet  ? 224
                      : 1152};
}

void add_lag_options(CLI::App& cmd, BenchLagArgs& a) {
  cmd.add_option("--gradient-lag", a.gradient_lag,
                 "under mpirun: 1 applies each step's averaged gradients one step later, so "
                 "their allreduce runs during the next step (as train.gradient_lag)");
  cmd.add_option("--lag-correction", a.lag_correction,
                 "under mpirun, with --gradient-lag 1: none, or local (each rank's own fresh "
                 "gradient in place of its stale share; as train.gradient_lag.correction)");
}

void check_lag_args(const BenchLagArgs& a, const std::string& command) {
  if (a.gradient_lag < 0 || a.gradient_lag > 1)
    throw_usage(command + ": --gradient-lag is 0 or 1, got " + std::to_string(a.gradient_lag));
  if (a.lag_correction != "none" && a.lag_correction != "local")
    throw_usage(command + ": --lag-correction is none or local, got '" + a.lag_correction + "'");
  if (a.lag_correction == "local" && a.gradient_lag == 0)
    throw_usage(command +
                ": --lag-correction local corrects --gradient-lag 1 (as "
                "train.gradient_lag.correction)");
}

void set_lag_options(const BenchLagArgs& a, TrainingSessionOptions& to) {
  to.gradient_lag = a.gradient_lag > 0;
  to.lag_local_correction = a.lag_correction == "local";
}

void add_model_options(CLI::App& cmd, BenchModelArgs& a) {
  cmd.add_option("--model", a.model, "a registered model (cosmoflow, deepcam, tiramisu, resnet50)");
  cmd.add_option("--size", a.size, "cosmoflow: cube size (a multiple of 32)");
  cmd.add_option("--conv-size", a.conv_size, "cosmoflow: filters of the first conv (reference 32)");
  cmd.add_option("--dropout", a.dropout, "cosmoflow: dropout rate (the peer uses 0.5)");
  cmd.add_option("--height", a.height,
                 "deepcam, tiramisu (a multiple of 16; default 768), resnet50 (default 224): "
                 "sample height");
  cmd.add_option("--width", a.width,
                 "deepcam, tiramisu (a multiple of 16; default 1152), resnet50 (default 224): "
                 "sample width");
}

// Through the model registry, as a config's model section would be: an unknown --model lists
// the registered ones. --size, --conv-size and --dropout are CosmoFlow's keys, --height and
// --width the image models'.
ModelConfig bench_model_config(const BenchModelArgs& a) {
  ModelConfig mc;
  mc.name = a.model;
  if (reads_images(a.model)) {
    const auto [h, w] = image_size(a);
    const int64_t channels = reads_climate_fields(a.model) ? 16 : 3;
    mc.attrs.set("input_shape", std::vector<int64_t>{h, w, channels});
  } else {
    mc.attrs.set("input_shape", std::vector<int64_t>{a.size, a.size, a.size, 4});
    mc.attrs.set("conv_size", a.conv_size);
    mc.attrs.set("dropout", a.dropout);
  }
  return mc;
}

// The model's flags, for the report's config line.
std::string size_flags(const BenchModelArgs& a) {
  if (reads_images(a.model)) {
    const auto [h, w] = image_size(a);
    return "--height " + std::to_string(h) + " --width " + std::to_string(w);
  }
  return "--size " + std::to_string(a.size) + " --conv-size " + std::to_string(a.conv_size);
}

nlohmann::json bench_json_head(const std::string& bench, const BenchModelArgs& a,
                               const Backend& backend, const std::string& precision, int64_t batch,
                               int threads) {
  nlohmann::json j;
  j["bench"] = bench;
  j["model"] = a.model;
  j["backend"] = backend.name();
  if (const std::string isa = backend.instruction_sets(); !isa.empty()) j["isa"] = isa;
  j["precision"] = precision;
  if (reads_images(a.model)) {
    const auto [h, w] = image_size(a);
    j["height"] = h;
    j["width"] = w;
  } else {
    j["size"] = a.size;
    j["conv_size"] = a.conv_size;
  }
  j["batch"] = batch;
  j["threads"] = threads;
  return j;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

std::string spatial_text(const std::vector<int>& parts) {
  std::string s;
  for (int p : parts) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

}  // namespace crest::tools

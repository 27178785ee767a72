// What the model benchmarks (crest bench train, crest bench infer) share: the model flags, the
// model they describe (through the model registry, as a config's model section would be), random
// inputs like the peer scripts', and the process's peak memory.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "crest/engine/random_batch.hpp"
#include "crest/engine/session.hpp"
#include "crest/engine/training_session.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/built_model.hpp"
#include "crest/optim/optimizer_config.hpp"
#include "crest/train/config.hpp"

namespace crest::tools {

struct BenchModelArgs {
  std::string model = "cosmoflow";
  int64_t size = 128, conv_size = 32;  // cosmoflow
  int64_t height = 0, width = 0;       // image models; 0: the model's default (image_size)
  double dropout = 0.5;
};

// How a model benchmark runs: what both crest bench train and crest bench infer take.
struct BenchRunArgs {
  std::string backend = default_backend_name();
  std::string precision = "float32";  // crest.precision's values
  int threads = 0;                    // 0: the benchmark's default
  bool autotune = false;              // choose conv layouts by measuring them (crest.autotune)
};

// The engine session of a model benchmark; where --threads is 0, the default threads of one of
// `local_ranks` ranks on a node (default_threads_per_rank), as crest train's.
SessionOptions bench_session_options(const BenchRunArgs& a, Purpose purpose, int64_t batch,
                                     int local_ranks);

// `optimizer` (a registered name, any spelling), or the model's reference optimizer where it is
// "", with the config's defaults for it and a momentum of 0.9 where it takes one (the peers' SGD).
OptimizerConfig bench_optimizer_config(const std::string& model, const std::string& optimizer);

// The gradient lag of a training benchmark (crest bench train, crest bench pipeline), as
// train.gradient_lag: 0 | 1 and its correction: none | local.
struct BenchLagArgs {
  int gradient_lag = 0;
  std::string lag_correction = "none";
};
// --gradient-lag and --lag-correction.
void add_lag_options(CLI::App& cmd, BenchLagArgs& a);
// Bad values and a correction without a lag exit 2 naming `command`'s flags.
void check_lag_args(const BenchLagArgs& a, const std::string& command);
// train.gradient_lag's options of a training session.
void set_lag_options(const BenchLagArgs& a, TrainingSessionOptions& to);

// --model, --size, --conv-size, --dropout (CosmoFlow's keys), --height, --width (the image
// models': DeepCAM's, the Tiramisu's and ResNet-50's).
void add_model_options(CLI::App& cmd, BenchModelArgs& a);
// An image model's sample height and width: --height/--width where given, else the model's
// reference size (the climate fields' 768 x 1152, ImageNet's 224 x 224).
std::pair<int64_t, int64_t> image_size(const BenchModelArgs& a);
// An unknown --model lists the registered ones.
ModelConfig bench_model_config(const BenchModelArgs& a);
// The model's flags, for reports: "--size 128 --conv-size 32".
std::string size_flags(const BenchModelArgs& a);
// The first fields of a model benchmark's JSON line: what ran, on what (the backend and the
// instruction sets it dispatches to), at which size.
nlohmann::json bench_json_head(const std::string& bench, const BenchModelArgs& a,
                               const Backend& backend, const std::string& precision, int64_t batch,
                               int threads);
// The process's peak resident memory so far (MiB).
double peak_rss_mb();
// A --spatial decomposition as the JSON line gives it: "4,1,1".
std::string spatial_text(const std::vector<int>& parts);

}  // namespace crest::tools

// crest predict --config C (--checkpoint PATH | --weights F) --data DIR [--split S] --out F.h5
//               [--batch B] [--precision P] [--probabilities] [--skip-bad] [--overwrite]
//               [--threads N] [key.path=value ...]
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/train/config.hpp"
#include "crest/train/prediction.hpp"

namespace crest::tools {
namespace {

struct PredictArgs {
  std::string config, data;
  std::vector<std::string> overrides;
  PredictOptions opts;
  int64_t batch = 0;
  int threads = 0;
  std::string precision;
};

// The command's options as config overrides: the same keys a config file sets.
std::vector<std::string> overrides_of(const PredictArgs& a) {
  std::vector<std::string> o;
  for (const std::string& kv : a.overrides) {
    if (kv.find('=') == std::string::npos)
      throw_usage("'" + kv + "' is neither an option nor a key.path=value override");
    o.push_back(kv);
  }
  if (!a.data.empty()) o.push_back("data.data_dir=" + a.data);
  if (a.batch < 0) throw_usage("--batch must be >= 1");
  if (a.batch > 0) o.push_back("data.batch_size=" + std::to_string(a.batch));
  if (a.threads < 0) throw_usage("--threads must be >= 0 (0: the node's cores / its ranks)");
  if (a.threads > 0) o.push_back("crest.threads=" + std::to_string(a.threads));
  if (!a.precision.empty()) o.push_back("crest.precision=" + a.precision);
  return o;
}

}  // namespace

void register_predict(CLI::App& app) {
  auto args = std::make_shared<PredictArgs>();
  CLI::App* cmd = app.add_subcommand(
      "predict", "run a trained model over every sample of a split into an HDF5 file");
  cmd->add_option("--config,-c", args->config, "the model's config (its training config)")
      ->required();
  cmd->add_option("--checkpoint", args->opts.checkpoint,
                  "a checkpoint file, or a run directory (its newest checkpoint)");
  cmd->add_option("--weights", args->opts.weights, "or a safetensors weights file");
  cmd->add_option("--data", args->data, "the dataset directory (same as data.data_dir=DIR)");
  cmd->add_option("--split", args->opts.split,
                  "validation (default), train, or a directory of sample files");
  cmd->add_option("--out,-o", args->opts.out, "the HDF5 file to write")->required();
  cmd->add_option("--batch", args->batch, "samples per forward pass (same as data.batch_size)");
  cmd->add_option("--precision", args->precision, "float32, bf16, fp16 or float64");
  cmd->add_option("--threads", args->threads,
                  std::string("compute threads per rank (") + kDefaultThreadsHelp + ")");
  cmd->add_flag("--probabilities", args->opts.probabilities,
                "segmentation: also write the class probabilities (float16)");
  cmd->add_flag("--skip-bad", args->opts.skip_bad,
                "skip bad sample files (named in the summary) instead of failing");
  cmd->add_flag("--overwrite", args->opts.overwrite, "replace an existing --out");
  cmd->add_option("overrides", args->overrides, "key.path=value config overrides");
  cmd->callback([args] {
    const Config config = load_config(args->config, overrides_of(*args));
    run_prediction(config, args->opts, std::cout);
  });
}

}  // namespace crest::tools

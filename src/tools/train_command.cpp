// crest train --config FILE [key.path=value ...] [--init-weights F] [--save-weights F] [--threads
// N]
//             [--timeline F] [--dry-run] [--overwrite]
// crest train --resume RUN_DIR [key.path=value ...]   (the config is RUN_DIR/config.yaml)
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/train/config.hpp"
#include "crest/train/trainer.hpp"

namespace crest::tools {

void register_train(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> rest;
    TrainOptions opts;
    int threads = 0;
    std::string resume, precision;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd =
      app.add_subcommand("train", "train a model from a YAML config (reference schema)");
  cmd->add_option("--config,-c", args->config, "config file (e.g. configs/cosmoflow-demo.yaml)");
  cmd->add_option("overrides", args->rest, "key.path=value overrides, e.g. data.batch_size=2");
  cmd->add_option("--init-weights", args->opts.init_weights,
                  "start from these weights (safetensors)");
  cmd->add_option("--timeline", args->opts.timeline,
                  "write a Chrome-trace timeline of every rank (chrome://tracing, Perfetto)");
  cmd->add_option("--save-weights", args->opts.save_weights,
                  "write the trained weights (safetensors)");
  cmd->add_option("--threads", args->threads,
                  std::string("compute threads per rank (same as crest.threads=N; ") +
                      kDefaultThreadsHelp + ")");
  cmd->add_option("--precision", args->precision,
                  "float32, bf16, fp16 or float64 (same as crest.precision=...)");
  cmd->add_option("--resume", args->resume,
                  "continue the run in RUN_DIR from its newest checkpoint (config: "
                  "RUN_DIR/config.yaml + overrides)");
  cmd->add_flag(
      "--overwrite", args->opts.overwrite,
      "start afresh in an output_dir that holds an earlier run's checkpoints (deletes them)");
  cmd->add_flag("--dry-run", args->opts.dry_run,
                "validate the config, build and compile the model, print a summary; touch no data");
  cmd->callback([args] {
    std::vector<std::string> overrides;
    for (const auto& a : args->rest) {
      // The config may also be given as the first bare argument: crest train FILE [overrides].
      if (a.find('=') == std::string::npos && args->config.empty())
        args->config = a;
      else if (a.find('=') == std::string::npos)
        throw_usage("'" + a + "' is neither an option nor a key.path=value override");
      else
        overrides.push_back(a);
    }
    if (!args->resume.empty()) {
      // The run directory carries its own resolved config; overrides change it (model changes
      // are refused against the checkpoint), and output_dir is the directory itself.
      if (!args->config.empty())
        throw_usage("--resume takes its config from " + args->resume +
                    "/config.yaml: give overrides, not --config");
      if (args->opts.overwrite) throw_usage("--resume and --overwrite contradict each other");
      args->config = args->resume + "/config.yaml";
      if (!std::filesystem::exists(args->config))
        throw_input(args->config + ": not found: " + args->resume +
                    " is not a crest run directory");
      overrides.push_back("output_dir=" + args->resume);
      args->opts.resume = true;
    }
    if (args->config.empty()) throw_usage("crest train needs --config FILE (or --resume RUN_DIR)");
    if (args->threads < 0)
      throw_usage("--threads must be >= 0 (0: the node's cores divided among its ranks)");
    if (args->threads > 0) overrides.push_back("crest.threads=" + std::to_string(args->threads));
    if (!args->precision.empty()) overrides.push_back("crest.precision=" + args->precision);
    const Config config = load_config(args->config, overrides);
    command_exit_code = run_training(config, args->opts, std::cout).exit_code;
  });
}

}  // namespace crest::tools

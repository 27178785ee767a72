// crest config from-args deepcam -- ARGS: the DeepCAM reference's train.py command line as a
// crest run config on stdout, so a reference user converts a run script in one step.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/train/config.hpp"
#include "deepcam_args.hpp"

namespace crest::tools {
namespace {

// The YAML must load as it is printed: a value the reference accepts but crest refuses (say a
// decay_rate above 1) is reported here, naming the crest key, instead of at `crest train`.
void check_loads(const std::string& yaml) {
  try {
    load_config_text(yaml, "<from-args deepcam>");
  } catch (const Error& e) {
    throw_usage(
        std::string("config from-args deepcam: the arguments give a config crest refuses: ") +
        e.what());
  }
}

void register_from_args(CLI::App& config) {
  auto kind = std::make_shared<std::string>();
  auto argv = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = config.add_subcommand(
      "from-args",
      "print the crest config (YAML) of a reference run given its command-line arguments");
  cmd->add_option("kind", *kind, "the reference: deepcam (mlcommons/hpc deepcam train.py)")
      ->required()
      ->check(CLI::IsMember({"deepcam"}));
  cmd->add_option("args", *argv,
                  "the reference's arguments, after --: crest config from-args deepcam -- "
                  "--local_batch_size 2 --optimizer LAMB ...");
  cmd->callback([kind, argv] {
    const std::string yaml = deepcam_args_to_yaml(parse_deepcam_args(*argv), *argv);
    check_loads(yaml);
    std::cout << yaml;
  });
}

}  // namespace

void register_config(CLI::App& app) {
  CLI::App* config = app.add_subcommand("config", "config tools: from-args");
  config->require_subcommand(1);
  register_from_args(*config);
}

}  // namespace crest::tools

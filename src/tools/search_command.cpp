// crest search --config BASE --space SPACE --out DIR [key.path=value ...]
//              [--ranks-per-trial k] [--algorithm random|grid|asha] [--trials N] [--seed S]
//              [--metric NAME] [--min-epochs r] [--max-epochs R] [--eta e]
// Hyperparameter search inside one job (docs/search.md).
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/search/study.hpp"

namespace crest::tools {

void register_search(CLI::App& app) {
  struct Args {
    StudyOptions study;
    std::string algorithm = "random";
    std::vector<std::string> rest;
    std::string resume;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "search", "hyperparameter search: many trials in one job, each on its own group of ranks");
  StudyOptions& o = args->study;
  cmd->add_option("--config,-c", o.base_config, "the base config every trial starts from");
  cmd->add_option("--space", o.space, "the search space (YAML: parameters: {key: {sampler}})");
  cmd->add_option("--out", o.out_dir, "the study's directory (trials/, trials.jsonl, best.yaml)");
  cmd->add_option("--resume", args->resume,
                  "continue the interrupted study in DIR (its options come from DIR/study.json)");
  cmd->add_option("overrides", args->rest, "key.path=value overrides of the base config");
  cmd->add_option("--ranks-per-trial", o.ranks_per_trial,
                  "ranks that train one trial together (divides the job's ranks)");
  cmd->add_option("--algorithm", args->algorithm, "random, grid, asha or pbt");
  cmd->add_option(
      "--trials", o.trials,
      "trials to start (default: random 10, grid every combination, asha 27; pbt: one per group)");
  cmd->add_option("--seed", o.seed, "the seed of the trials' parameters");
  cmd->add_option("--metric", o.metric,
                  "the figure optimised (val_loss, val_mae, val_iou; default: the task's quality "
                  "metric)");
  cmd->add_option("--min-epochs", o.min_epochs, "asha: the first rung's epochs (default 1)");
  cmd->add_option("--max-epochs", o.max_epochs, "asha: the last rung's (default data.n_epochs)");
  cmd->add_option("--eta", o.eta, "asha: the reduction factor (default 3)");
  cmd->callback([args] {
    if (!args->resume.empty()) {
      if (!args->study.base_config.empty() || !args->study.space.empty() || !args->rest.empty())
        throw_usage("--resume takes the study's options from " + args->resume +
                    "/study.json: give no --config, --space or overrides");
      args->study = read_study_options(args->resume);
      args->algorithm.clear();
    }
    StudyOptions& study = args->study;
    if (study.base_config.empty() || study.space.empty() || study.out_dir.empty())
      throw_usage("crest search needs --config FILE, --space FILE and --out DIR (or --resume DIR)");
    for (const auto& a : args->rest) {
      if (a.find('=') == std::string::npos)
        throw_usage("'" + a + "' is neither an option nor a key.path=value override");
      study.overrides.push_back(a);
    }
    const std::map<std::string, SearchAlgorithm> algorithms{{"random", SearchAlgorithm::random},
                                                            {"grid", SearchAlgorithm::grid},
                                                            {"asha", SearchAlgorithm::asha},
                                                            {"pbt", SearchAlgorithm::pbt}};
    if (!args->algorithm.empty()) {
      const auto it = algorithms.find(args->algorithm);
      if (it == algorithms.end())
        throw_usage("--algorithm " + args->algorithm + ": not one of random, grid, asha, pbt");
      study.algorithm = it->second;
    }
    const std::unique_ptr<Communicator> world = make_world_communicator({});
    const StudySummary s = run_study(study, *world, std::cout);
    if (!s.preempted.empty()) {
      if (world->rank() == 0)
        std::cout << "search stopped (" << s.preempted << "): continue with crest search --resume "
                  << study.out_dir << "\n";
      command_exit_code = 75;  // EX_TEMPFAIL, as a preempted crest train
      return;
    }
    if (world->rank() == 0)
      std::cout << "search done: " << s.trials << " trials, " << s.completed << " completed, "
                << s.pruned << " pruned, " << s.failed << " failed"
                << (s.best_trial >= 0 ? "; best: trial " + std::to_string(s.best_trial) + " (" +
                                            study.out_dir + "/best.yaml)"
                                      : std::string("; no trial finished with a metric"))
                << "\n";
  });
}

}  // namespace crest::tools

#include "crest/train/observers.hpp"

#include <unistd.h>

#include "crest/core/error.hpp"

namespace crest {
namespace {

// What each benchmark's reference (mlcommons/hpc) logs that is not the same for all: DeepCAM's
// train.py ends every run with run_stop "success", the target reached or not. (CosmoFlow's
// train.py does too, but crest's CosmoFlow log keeps MLPerf's meaning, "success" only at the
// target; a benchmark not listed does the same.)
struct BenchmarkLogRules {
  const char* benchmark;
  bool success_when_epochs_end;
};
constexpr BenchmarkLogRules kBenchmarkLogRules[] = {{"deepcam", true}};

}  // namespace

MlperfObserverOptions mlperf_options(const Config& config, const Task& task, bool resumed) {
  MlperfObserverOptions mo;
  mo.echo = config.mlperf.echo_stdout;
  mo.append = resumed;
  mo.benchmark = task.name;
  mo.quality_metric = task.quality_metric() ? task.quality_metric()->short_name : "";
  mo.target = task.target;
  for (const BenchmarkLogRules& rules : kBenchmarkLogRules)
    if (mo.benchmark == rules.benchmark) mo.success_when_epochs_end = rules.success_when_epochs_end;
  return mo;
}

std::vector<std::unique_ptr<RunObserver>> make_run_observers(const Config& config, const Task& task,
                                                             std::ostream& log, bool resumed,
                                                             bool progress_bar) {
  std::vector<std::unique_ptr<RunObserver>> observers;
  observers.push_back(make_progress_observer(log, config.train.log_every_s,
                                             progress_bar && isatty(STDOUT_FILENO) == 1));
  if (!config.output_dir.empty())
    observers.push_back(make_tensorboard_observer(config.output_dir + "/tensorboard", log));
  if (!config.output_dir.empty())
    observers.push_back(make_mlperf_observer(config.output_dir + "/mllog.txt", log,
                                             mlperf_options(config, task, resumed)));
  if (config.train.report) {
    if (config.output_dir.empty())
      throw_usage("train.report: true needs an output_dir to write report.html into");
    observers.push_back(make_report_observer(config.output_dir, task, log));
  }
  return observers;
}

}  // namespace crest

#include "crest/train/observers.hpp"

#include <unistd.h>

#include "crest/core/error.hpp"

namespace crest {

std::vector<std::unique_ptr<RunObserver>> make_run_observers(const Config& config,
                                                             std::ostream& log, bool resumed) {
  std::vector<std::unique_ptr<RunObserver>> observers;
  observers.push_back(
      make_progress_observer(log, config.train.log_every_s, isatty(STDOUT_FILENO) == 1));
  if (!config.output_dir.empty())
    observers.push_back(make_tensorboard_observer(config.output_dir + "/tensorboard", log));
  if (!config.output_dir.empty())
    observers.push_back(
        make_mlperf_observer(config.output_dir + "/mllog.txt", log,
                             {.echo = config.mlperf.echo_stdout, .append = resumed}));
  if (config.train.report) {
    if (config.output_dir.empty())
      throw_usage("train.report: true needs an output_dir to write report.html into");
    observers.push_back(make_report_observer(config.output_dir, log));
  }
  return observers;
}

}  // namespace crest

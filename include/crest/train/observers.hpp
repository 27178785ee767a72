// The records a run leaves, as RunObservers (run_observer.hpp): a registry of observer kinds, each
// registered in its own file (CREST_REGISTER_OBSERVER), so the trainer does not need to know which
// exist. Each observer is created only where its config asks for it.
#pragma once
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crest/train/config.hpp"
#include "crest/train/run_observer.hpp"
#include "crest/train/task.hpp"

namespace crest {

// What an observer's maker gets: the run's config and task, rank 0's log, whether the run resumes
// (records it appends to are continued, not replaced), and whether a terminal progress bar is
// allowed.
struct ObserverContext {
  const Config& config;
  const Task& task;
  std::ostream& log;
  bool resumed = false;
  bool progress_bar = true;
};

// A kind of record a run can leave. `make` returns null when the config does not ask for it, and
// throws crest::Error naming the path or key when it cannot be made (before training starts).
// Observers are called in `order` (then name): progress 10, TensorBoard 20, MLPerf 30, report 40.
struct ObserverType {
  std::string name;
  int order = 100;
  std::function<std::unique_ptr<RunObserver>(const ObserverContext&)> make;
};
bool register_observer_type(ObserverType type);
#define CREST_REGISTER_OBSERVER(id, ...)                              \
  [[maybe_unused]] static const bool crest_observer_registered_##id = \
      ::crest::register_observer_type(__VA_ARGS__)

// Rank 0's observers for a run of `task` configured by `config`, every registered kind's:
// TensorBoard scalars (output_dir/tensorboard/), the MLPerf log, the progress display on `log`, the
// performance report. Throws crest::Error (input) naming a path that cannot be created, before any
// training starts. `resumed`: the run continues from a checkpoint, so the records it appends to
// (the MLPerf log) are continued, not replaced. `progress_bar`: false keeps the terminal's bar off
// even when stdout is a terminal (the progress lines on `log` stay).
std::vector<std::unique_ptr<RunObserver>> make_run_observers(const Config& config, const Task& task,
                                                             std::ostream& log, bool resumed,
                                                             bool progress_bar = true);

// Progress inside each epoch: a bar on stdout when `terminal`, else a line on `log` every
// `log_every_s` seconds (train.log_every_s).
std::unique_ptr<RunObserver> make_progress_observer(std::ostream& log, double log_every_s,
                                                    bool terminal);

// TensorBoard scalars in `logdir`: train/loss_step every step (rank 0's batch loss), and per
// epoch train/loss, train/learning_rate, train/samples_per_s, train/data_wait_pct,
// validation/loss and validation/<metric> for each of the task's metrics (validation/mae;
// job-wide, step = epoch). Flushed every epoch.
std::unique_ptr<RunObserver> make_tensorboard_observer(const std::string& logdir,
                                                       std::ostream& log);

// The MLPerf HPC log (docs/mlperf.md): `:::MLLOG` lines for the hpc 3.0.0 compliance checker,
// for the task's benchmark (its model name) and quality metric, written to `path`
// (output_dir/mllog.txt) as the run goes and echoed to `log` when `echo` is set (config
// mlperf.stdout). A fresh log moves an existing file at `path` aside (MllogWriter); `append` adds
// to it instead (a resumed run). Throws crest::Error (input) naming the path when the file cannot
// be created.
struct MlperfObserverOptions {
  bool echo = false;
  bool append = false;
  std::string benchmark = "cosmoflow";  // submission_benchmark
  // The metric eval_error carries (Metric::short_name; "" logs none) and the target that makes
  // run_stop's status "success".
  std::string quality_metric = "mae";
  std::optional<QualityTarget> target;
  // run_stop's status for a run that ends normally without reaching the target (its epochs ran
  // out): "aborted" unless the benchmark's reference logs "success" then (DeepCAM; docs/mlperf.md).
  bool success_when_epochs_end = false;
};
// The options a run of `task` writes its MLPerf log with (echo, benchmark, quality, target).
MlperfObserverOptions mlperf_options(const Config& config, const Task& task, bool resumed);
std::unique_ptr<RunObserver> make_mlperf_observer(const std::string& path, std::ostream& log,
                                                  const MlperfObserverOptions& options = {});

// The performance report (train.report: true): `dir`/report.json and `dir`/report.html written
// when the run stops, with per-epoch figures, the per-layer profile and % of this machine's
// measured fp32 GEMM peak (report.hpp, docs/report.md). Checks now that `dir` is writable.
std::unique_ptr<RunObserver> make_report_observer(const std::string& dir, const Task& task,
                                                  std::ostream& log);

}  // namespace crest
